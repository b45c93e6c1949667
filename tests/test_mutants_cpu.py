"""The mutant catalog on the CPU (properties/mutants/).

Every edit still applies exactly once to the current kernel; the real kernel passes the static tier through
the same copy-and-subprocess path the mutants take (so no kill is vacuous); every mutant declared "static" is
killed by it; the real kernel passes the contract-cpu
tier (the contract property with CPU tensors, properties/contract/) and every contract mutant declared
"contract-cpu" is killed by it. The differential tier's own logic (sweep,
minimisation, case files, replay) runs here on a fake kernel: the NumPy model with one deliberate fault,
writing CPU tensors. Saved minimal cases (corpora/mutants/) must still hold the model's outputs, and the
mutant's must differ from them.
"""

import functools
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from kernel import routing
from kernel.layout import META_NUM_CTAS
from common.provenance import REPO_ROOT
from oracles.numpy_model import route as model_route
from properties.engine import casefile, device
from properties.engine.cases import Outputs, RoutingCase
from properties.engine.compare import disagreements
from properties.engine.implementations import REGISTRY
from properties.inputs.families import batches, families
from properties.mutants import catalog, generate, runner
from properties.mutants import probe as mutant_probe
from properties.mutants.catalog import CATALOG, CONTRACT_CPU, CONTRACT_TIERS, DIFFERENTIAL, STATIC, MutantEditError

STATIC_MUTANTS = [m for m in CATALOG if STATIC in m.kills]
CONTRACT_CPU_MUTANTS = [m for m in CATALOG if CONTRACT_CPU in m.kills]
SAVED_CASES = sorted(mutant_probe.CORPUS_DIR.glob("*.json"))


def test_the_catalog_applies_to_the_current_kernel():
    catalog.check_catalog()
    assert 0 < len(CATALOG) <= catalog.MAX_HAND and all(m.reason.strip() for m in CATALOG)
    assert all(m.kills for m in CATALOG)


@pytest.mark.parametrize("target,old", [("routing.py", "text the kernel does not hold"),
                                        ("routing.py", "Int32(PADDING)"), ("network.py", "SORT8")],
                         ids=["missing", "more than once", "not a target"])
def test_an_edit_that_does_not_apply_exactly_once_stops_the_run(target, old):
    mutant = catalog._mutant("broken", "an edit that cannot apply", (STATIC,), (target, old, "x"))
    with pytest.raises(MutantEditError, match="broken"):
        catalog.mutated_sources(mutant)
    with pytest.raises(MutantEditError):
        catalog.check_catalog(CATALOG + (mutant,))


def test_a_copy_carries_the_edit_and_nothing_else(tmp_path):
    mutant = next(m for m in CATALOG if m.name == "sum_reversed")
    copy = catalog.materialise(mutant, tmp_path)
    for source in catalog.KERNEL_DIR.glob("*.py"):
        edited = (copy / source.name).read_text()
        want = catalog.mutated_sources(mutant).get(source.name, source.read_text())
        assert edited == want, source.name
    assert "picked[-2::-1]" in (copy / "routing.py").read_text()


def test_the_real_kernel_passes_the_static_tier():
    real = runner.run_probe(None, STATIC)
    assert real.error is None and real.killed is False, real.error or real.evidence
    assert len(real.ptx) == len(routing.VARIANT_KEYS) and real.launches


# b = 3 sent to a kernel of 3 warps (the generated set's routing.kernel_tokens.int_plus_one.1, as an edit here).
LAUNCH_MUTANTS = (catalog._mutant("token_kernels_at_b_3", "b = 3 sent to a kernel of 3 warps", (DIFFERENTIAL,),
                                  ("routing.py", "(rows == 2 and tile_n >= 2)", "(rows in (2, 3) and tile_n >= 2)")),)


def test_a_mutant_of_what_route_launches_keeps_the_ptx_but_not_the_launch_digest():
    """The kernel choice is host code: its mutants compile to the real kernel's PTX, and only the digest of what
    route launches for each call shape tells them from an equivalent edit (the generated run's rule on these digests:
    tests/test_mutants_generated_cpu.py). Each is probed whole (no expected tier, so no --first-kill): the static
    tier's check of KERNELS against the kernels route launches kills b = 3's kernel before any compile, which would
    leave no PTX digest to compare."""
    mutants = [replace(m, kills=frozenset()) for m in LAUNCH_MUTANTS]
    outcomes = runner._pool_run([(None, STATIC, ())] + [(m, STATIC, ()) for m in mutants], 2, print)
    real = outcomes[("real", STATIC)]
    assert real.launches and len(mutants) == len(LAUNCH_MUTANTS)
    for mutant in mutants:
        outcome = outcomes[(mutant.name, STATIC)]
        assert outcome.ptx == real.ptx and outcome.launches != real.launches, mutant.name


@pytest.mark.parametrize("mutant", STATIC_MUTANTS, ids=lambda m: m.name)
def test_the_static_tier_kills(mutant):
    outcome = runner.run_probe(mutant, STATIC)
    assert outcome.error is None, outcome.error
    assert outcome.killed, f"{mutant.name} survived the static checks"
    print("\n".join(outcome.evidence[:4]))


# ---------------------------------------------------------------------------------------------- contract

def test_every_contract_mutant_edits_the_contract_alone_and_says_why_a_tier_of_its_cannot_kill_it():
    mutants = [m for m in CATALOG if m.tiers == CONTRACT_TIERS]
    assert mutants and all({e.target for e in m.edits} == {"contract.py"} for m in mutants)
    assert all(m.escapes for m in mutants if m.kills != set(CONTRACT_TIERS))
    assert all(m.tiers != CONTRACT_TIERS for m in STATIC_MUTANTS)


def test_the_real_kernel_passes_the_contract_cpu_tier():
    outcome = runner.run_probe(None, CONTRACT_CPU)
    assert outcome.error is None and outcome.killed is False, outcome.error or outcome.evidence


@pytest.mark.parametrize("mutant", CONTRACT_CPU_MUTANTS, ids=lambda m: m.name)
def test_the_contract_cpu_tier_kills(mutant):
    outcome = runner.run_probe(mutant, CONTRACT_CPU)
    assert outcome.error is None, outcome.error
    assert outcome.killed, f"{mutant.name} survived the contract property on the CPU"
    print("\n".join(outcome.evidence[:4]))


# ---------------------------------------------------------------------------------------------- differential

def _flip_weights_of_rows_with_inf(case, ids, weight_bits, metadata):
    weight_bits[:case.b][np.isposinf(case.logits).any(axis=1), 0] ^= 1


def _extra_cta_from_tile_3(case, ids, weight_bits, metadata):
    if case.has_metadata and case.tile_n >= 3:
        metadata[META_NUM_CTAS] += 1


def _no_fault(case, ids, weight_bits, metadata):
    pass


def _fake_route(fault):
    """kernel.routing.route stand-in: the model's outputs written into the (CPU) tensors it is given, then
    ``fault`` (on those tensors: the metadata vector whole where device.launch passes it whole)."""

    def route(logits, bias, ids, weights, scale, renormalize=True, metadata=None, local_expert_offset=0,
              num_local_experts=0, tile_n=0):
        case = RoutingCase(logits.numpy().copy(), bias.numpy().copy(), np.float32(scale), renormalize,
                           tile_n if metadata is not None else None, local_expert_offset, num_local_experts,
                           "fake kernel call")
        want = REGISTRY["model"].run(case)
        ids.copy_(torch.from_numpy(want.ids))
        weights.copy_(torch.from_numpy(want.weights))
        meta = None if metadata is None else metadata.numpy()
        if meta is not None:
            meta[:want.metadata.size] = want.metadata
        fault(case, ids.numpy(), weights.view(torch.int32).numpy(), meta)

    return route


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    """The engine's kernel path on CPU tensors (the probe's sweep through device.py and the registry's "cute"
    both), saving into tmp_path, memcheck finding nothing; returns a fault setter."""
    monkeypatch.setattr(device, "target", lambda: torch.device("cpu"))
    monkeypatch.setattr(mutant_probe.memcheck, "breaches", lambda: [])
    monkeypatch.setattr(device, "synchronize", lambda: None)
    monkeypatch.setattr(mutant_probe, "SAVED_DIR", tmp_path)
    monkeypatch.setattr(routing, "prepare", lambda renormalize=True: None)
    cute = REGISTRY["cute"]
    monkeypatch.setitem(REGISTRY, "cute", replace(cute, declaration=replace(cute.declaration, device="cpu")))

    def set_fault(fault):
        monkeypatch.setattr(routing, "route", _fake_route(fault))

    return set_fault


def test_a_run_saves_its_minimal_cases_under_the_untracked_reports_not_the_committed_corpus():
    saved = mutant_probe.SAVED_DIR.relative_to(REPO_ROOT)
    assert saved.parts[0] == "reports" and "/reports/" in (REPO_ROOT / ".gitignore").read_text().split()
    assert mutant_probe.CORPUS_DIR.relative_to(REPO_ROOT).parts[0] == "corpora"


def test_a_weight_fault_is_found_minimised_to_one_row_saved_and_replayed(fake_gpu):
    fake_gpu(_flip_weights_of_rows_with_inf)
    result = mutant_probe.differential("fake_weights", "weights of rows with +inf flipped")
    assert result["killed"], result
    record = casefile.read(result["case"])
    case = record.case
    assert record.origin["mutant"] == "fake_weights" and record.origin["cases_tried"] >= 1
    assert case.b == 1 and np.isposinf(case.logits).any() and not case.has_metadata
    assert case.scale == mutant_probe.SIMPLE_SCALE and not case.bias.any()
    assert [(d["implementation"], d["field"]) for d in record.disagreements] == [("mutant:fake_weights", "weights")]
    assert mutant_probe.replay([result["case"]])["killed"]
    fake_gpu(_no_fault)
    assert not mutant_probe.replay([result["case"]])["killed"]


def test_a_metadata_fault_keeps_the_metadata_and_the_smallest_failing_tile(fake_gpu):
    fake_gpu(_extra_cta_from_tile_3)
    result = mutant_probe.differential("fake_metadata", "one CTA too many from tile 3 on")
    case = casefile.read(result["case"]).case
    assert result["killed"] and case.b == 1 and case.tile_n == 3, result


def test_a_known_killer_is_tried_first_and_the_sweep_runs_only_when_it_no_longer_kills(fake_gpu, monkeypatch):
    fake_gpu(_flip_weights_of_rows_with_inf)
    known = mutant_probe.differential("fake_weights", "")["case"]
    swept = []
    plain = next(c for c in mutant_probe.case_plan(families(), batches) if not c.has_metadata)
    monkeypatch.setattr(mutant_probe, "case_plan", lambda *a: swept.append(1) or iter([plain]))
    result = mutant_probe.differential("fake_weights", "", [known])
    assert result["killed"] and not swept and result["evidence"][0].startswith("its saved case")
    assert casefile.read(result["case"]).origin["first"] == f"saved case {Path(known).name}"
    fake_gpu(_extra_cta_from_tile_3)  # another fault: the known case no longer mismatches, so the sweep runs
    assert not mutant_probe.differential("fake_weights", "", [known])["killed"] and swept


def test_the_runner_gives_a_differential_probe_its_committed_case_first():
    mutants = {m.name: m for m in generate.generate(catalog.KERNEL_DIR)}
    path = next(p for p in SAVED_CASES if p.stem in mutants)
    mutant = mutants[path.stem]
    assert runner.known_killers(mutant, "differential") == ("--known", str(path))
    assert runner.known_killers(mutant, STATIC) == () and runner.known_killers(None, "differential") == ()


def test_a_saved_case_whose_model_outputs_changed_is_refused(fake_gpu):
    fake_gpu(_flip_weights_of_rows_with_inf)
    path = mutant_probe.differential("fake_weights", "")["case"]
    record = casefile.read(path)
    model = record.outputs["model"]
    changed = Outputs(model.ids, (model.weights.view(np.uint32) ^ 1).view(np.float32), model.metadata)
    casefile.write(path, replace(record, outputs={**record.outputs, "model": changed}))
    with pytest.raises(RuntimeError, match="model's outputs changed"):
        mutant_probe.replay([path])


@pytest.mark.long
def test_an_exact_kernel_survives_the_whole_sweep(fake_gpu):
    fake_gpu(_no_fault)
    result = mutant_probe.differential("exact", "")
    plan = list(mutant_probe.case_plan(families(), batches))
    assert not result["killed"] and result["evidence"] == [f"{len(plan)} cases bit-exact",
                                                           "memcheck: every access in bounds"]


def test_a_sweep_with_no_mismatch_is_killed_by_a_memcheck_error(fake_gpu, monkeypatch):
    """An access out of bounds that no output shows (a store one word past a shared array) is a kill."""
    fake_gpu(_no_fault)
    plain = next(c for c in mutant_probe.case_plan(families(), batches) if not c.has_metadata)
    monkeypatch.setattr(mutant_probe, "case_plan", lambda *a: iter([plain]))  # one exact case: the sweep ends at once
    found = ["memcheck: Invalid __shared__ write of size 4 bytes"]
    monkeypatch.setattr(mutant_probe.memcheck, "breaches", lambda: found)
    result = mutant_probe.differential("exact", "")
    assert result["killed"] and result["evidence"] == found and result["case"] is None


def test_memcheck_without_the_tool_raises_rather_than_passing(monkeypatch):
    monkeypatch.setattr(mutant_probe.memcheck, "find_tool", lambda name: None)
    with pytest.raises(RuntimeError, match="no compute-sanitizer"):
        mutant_probe.memcheck.breaches()


def test_memcheck_evidence_is_the_tools_findings_without_its_banner(monkeypatch):
    """The lines compute-sanitizer prints for a store past a shared array (as on the H200), less its name."""
    memcheck = mutant_probe.memcheck
    stdout = ("========= COMPUTE-SANITIZER\n"
              "========= Invalid __shared__ write of size 4 bytes\n"
              "=========     at routing_kernel+0x1f0\n"
              "=========\n"
              "========= ERROR SUMMARY: 1 error\n")
    monkeypatch.setattr(memcheck, "find_tool", lambda name: "/bin/true")
    monkeypatch.setattr(memcheck.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a[0], memcheck.ERROR_EXIT, stdout, ""))
    assert memcheck.breaches() == ["memcheck: Invalid __shared__ write of size 4 bytes",
                                   "memcheck: at routing_kernel+0x1f0", "memcheck: ERROR SUMMARY: 1 error"]


def test_a_sweep_restricted_to_variants_runs_only_their_cases(fake_gpu):
    """A mutant whose PTX differs in some variants alone (its host code the real kernel's) is swept on the cases
    route launches on those: each case's variant is the kernel route picks for its b, tile and settings."""
    fake_gpu(_no_fault)
    plan = list(mutant_probe.case_plan(families(), batches))
    names = {mutant_probe.variant_of(c) for c in plan}
    assert names == {mutant_probe.variant_name(*key) for key in routing.VARIANT_KEYS}
    two_token = mutant_probe.variant_name(True, True, 2)
    assert all((mutant_probe.variant_of(c) == two_token) == (c.has_metadata and c.renormalize and c.b == 2
                                                             and c.tile_n >= 2) for c in plan)
    result = mutant_probe.differential("exact", "", variant_names=[two_token])
    wanted = sum(mutant_probe.variant_of(c) == two_token for c in plan)
    assert not result["killed"] and result["evidence"][0].startswith(f"{wanted} cases bit-exact (the variants ")
    assert 0 < wanted < len(plan) // 8


@pytest.mark.parametrize("argv,wanted", [
    (["differential", "--variants", "no_such"], "no variant named 'no_such'"),
    (["static", "--variants", "metadata=True renormalize=True tokens=2"], "only the differential tier"),
], ids=["unknown variant", "another tier"])
def test_the_probe_refuses_variants_it_cannot_sweep_in_one_line(argv, wanted, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        mutant_probe.main([argv[0], "--kernel-dir", str(Path(routing.__file__).parent),
                           "--result", str(tmp_path / "r.json"), "--name", "real", *argv[1:]])
    assert stop.value.code == 2 and wanted in capsys.readouterr().err and not (tmp_path / "r.json").exists()


def test_a_sweep_that_compares_no_case_is_no_verdict(fake_gpu):
    fake_gpu(_no_fault)
    with pytest.raises(RuntimeError, match="compared no case"):
        mutant_probe.differential("exact", "", variant_names=["no_such"])


def test_the_sweep_covers_every_family_b_setting_scale_tile_and_request():
    plan = list(mutant_probe.case_plan(families(), batches))
    prefix = mutant_probe.GENERATOR_PREFIX
    assert {c.generator.removeprefix(prefix).split(" b=")[0] for c in plan} == {f.name for f in families()}
    assert {c.b for c in plan} == set(range(1, 9))
    assert {(c.renormalize, c.has_metadata) for c in plan} == {(r, m) for r in (True, False) for m in (True, False)}
    assert {np.float32(c.scale).view(np.uint32) for c in plan} == set(mutant_probe.SCALE_BITS)
    requests = [c for c in plan if c.has_metadata]
    assert {c.tile_n for c in requests} == set(mutant_probe.TILES)
    kinds = {(c.local_expert_offset == 0 and c.num_local_experts == 256, c.num_local_experts == 1,
              c.local_expert_offset + c.num_local_experts == 256) for c in requests}
    assert len(kinds) >= 4, kinds


def test_every_batch_also_routes_a_local_range_with_a_pick_just_outside_each_end():
    """The range's boundaries one expert off (a pick at offset - 1 or at offset + count counted as local) show
    only when picks sit there: each batch has such a request, at every b."""
    plan = list(mutant_probe.case_plan(families(), batches))
    bounded = set()
    for case in (c for c in plan if c.has_metadata):
        picks = set(model_route(case.logits, case.bias, mutant_probe.SIMPLE_SCALE, True)[0].ravel().tolist())
        end = case.local_expert_offset + case.num_local_experts
        if case.local_expert_offset - 1 in picks and end in picks:
            bounded.add((case.generator, case.renormalize))
    assert bounded == {(c.generator, c.renormalize) for c in plan if not c.has_metadata}


def test_a_pick_just_below_the_range_with_picks_inside_it_is_routed_at_every_b():
    """A pick at offset - 1 counted as below every local pick changes a count that only a pick inside the range
    reads: some case at each b has both."""
    plan = list(mutant_probe.case_plan(families(), batches))
    found = set()
    for case in (c for c in plan if c.has_metadata):
        picks = set(model_route(case.logits, case.bias, mutant_probe.SIMPLE_SCALE, True)[0].ravel().tolist())
        offset, end = case.local_expert_offset, case.local_expert_offset + case.num_local_experts
        if offset - 1 in picks and any(offset <= p < end for p in picks):
            found.add(case.b)
    assert found == set(range(1, 9))


# ---------------------------------------------------------------------------------------------- saved cases

@functools.cache
def _mutant_names():
    """The catalog's and the generated set's mutant names: a saved case names one of either (made on first use)."""
    return {m.name for m in CATALOG} | {m.name for m in generate.generate(catalog.KERNEL_DIR)}


@pytest.mark.parametrize("path", SAVED_CASES, ids=lambda p: p.stem)
def test_a_saved_minimal_case_still_holds_the_models_outputs_and_the_mutants_disagreement(path):
    record = casefile.read(path)
    name = record.origin["mutant"]
    assert path.stem == name, f"{path.name}: the case of mutant {name} (the runner finds it by its name)"
    assert name in _mutant_names(), f"{path.name}: no mutant {name} in the catalog or the generated set"
    live = REGISTRY["model"].run(record.case)
    assert disagreements({"model": live, "recorded": record.outputs["model"]}) == [], path.name
    if "fault" not in record.origin:
        mutant = record.outputs[mutant_probe.MUTANT_PREFIX + name]
        assert disagreements({"model": live, "mutant": mutant}), f"{path.name}: the mutant's outputs are the model's"


# ---------------------------------------------------------------------------------------------- raised is no kill

def test_a_static_check_that_raises_is_reported_as_raised_not_as_a_problem():
    def raising(variant):
        raise KeyError("ptx")

    evidence, raised = mutant_probe._problems({"ok": lambda v: [], "broken": raising}, {}, "variant")
    assert evidence == [] and raised == ["variant: broken raised KeyError: 'ptx'"]


def _raising_launch(buffers):
    raise RuntimeError("an illegal memory access")


def test_a_kernel_call_that_raises_is_raised_not_killed(fake_gpu, monkeypatch):
    monkeypatch.setattr(device, "launch", _raising_launch)
    result = mutant_probe.differential("fake_fault", "the kernel call raises")
    assert not result["killed"] and result["raised"][0].startswith("case 1 ("), result
    assert not mutant_probe.replay([result["case"]])["killed"]
