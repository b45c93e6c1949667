"""The mutant catalog on the CPU (properties/mutants.py).

Every edit still applies exactly once to the current kernel; the real kernel passes the static tier through
the same copy-and-subprocess path the mutants take (so no kill is vacuous); every mutant declared "static" is
killed by it; the equivalent edits escape it as their reasons say. The differential tier's own logic (sweep,
minimisation, case files, replay) runs here on a fake kernel: the NumPy model with one deliberate fault,
writing CPU tensors. Saved minimal cases (corpora/mutants/) must still hold the model's outputs, and the
mutant's must differ from them.
"""

from dataclasses import replace

import numpy as np
import pytest
import torch

from kernel import check, routing
from kernel.layout import META_NUM_CTAS
from oracles.numpy_model import route as model_route
from oracles.numpy_model import routing_metadata
from properties import casefile, mutant_probe, mutants
from properties.differential import disagreements
from properties.implementations import REGISTRY, Implementation, Outputs
from properties.mutants import CATALOG, EQUIVALENT, STATIC, MutantEditError
from properties.families import batches, families

MIN_MUTANTS = 12
STATIC_MUTANTS = [m for m in CATALOG if STATIC in m.kills]
SAVED_CASES = sorted(mutant_probe.CORPUS_DIR.glob("*.json"))


def test_the_catalog_applies_to_the_current_kernel():
    mutants.check_catalog()
    assert len(CATALOG) >= MIN_MUTANTS
    assert all(m.kills for m in CATALOG) and not any(m.kills for m in EQUIVALENT)


@pytest.mark.parametrize("target,old", [("routing.py", "text the kernel does not hold"),
                                        ("routing.py", "Int32(PADDING)"), ("network.py", "SORT8")],
                         ids=["missing", "more than once", "not a target"])
def test_an_edit_that_does_not_apply_exactly_once_stops_the_run(target, old):
    mutant = mutants._mutant("broken", "an edit that cannot apply", (STATIC,), (target, old, "x"))
    with pytest.raises(MutantEditError, match="broken"):
        mutants.mutated_sources(mutant)
    with pytest.raises(MutantEditError):
        mutants.check_catalog(CATALOG + (mutant,))


def test_a_copy_carries_the_edit_and_nothing_else(tmp_path):
    mutant = next(m for m in CATALOG if m.name == "eps_1e-20")
    copy = mutants.materialise(mutant, tmp_path)
    for source in mutants.KERNEL_DIR.glob("*.py"):
        edited = (copy / source.name).read_text()
        want = mutants.mutated_sources(mutant).get(source.name, source.read_text())
        assert edited == want, source.name
    assert "Imm(0x1E3CE508)" in (copy / "routing.py").read_text()


def test_the_real_kernel_passes_the_static_tier_and_the_equivalent_edits_escape_it():
    outcomes = mutants._pool_run([(None, STATIC, ())] + [(m, STATIC, ()) for m in EQUIVALENT], 2, print)
    real = outcomes[("real", STATIC)]
    assert real.error is None and real.killed is False, real.error or real.evidence
    assert len(real.ptx) == 4
    for mutant in EQUIVALENT:
        outcome = outcomes[(mutant.name, STATIC)]
        assert outcome.error is None and outcome.killed is False, (mutant.name, outcome.error, outcome.evidence)
        assert (outcome.ptx == real.ptx) == mutant.same_ptx, mutant.name


@pytest.mark.parametrize("mutant", STATIC_MUTANTS, ids=lambda m: m.name)
def test_the_static_tier_kills(mutant):
    outcome = mutants.run_probe(mutant, STATIC)
    assert outcome.error is None, outcome.error
    assert outcome.killed, f"{mutant.name} survived the static checks"
    print("\n".join(outcome.evidence[:4]))


# ---------------------------------------------------------------------------------------------- differential

def _flip_weights_of_rows_with_inf(ids, weight_bits, metadata, rows, local):
    weight_bits[np.isposinf(rows).any(axis=1), 0] ^= 1


def _extra_cta_from_tile_3(ids, weight_bits, metadata, rows, local):
    if local is not None and local.tile >= 3:
        metadata[META_NUM_CTAS] += 1


def _no_fault(ids, weight_bits, metadata, rows, local):
    pass


def _fake_call_route(fault):
    """check.call_route stand-in: the model's outputs written into the (CPU) buffers, then ``fault``."""

    def call_route(buffers, scale, renormalize, local):
        rows, bias = buffers.logits.numpy(), buffers.bias.numpy()
        ids, weights = model_route(rows, bias, scale, renormalize)
        buffers.ids.copy_(torch.from_numpy(ids))
        buffers.weights.copy_(torch.from_numpy(weights))
        metadata = None if local is None else buffers.metadata_all.numpy()
        if local is not None:
            written = routing_metadata(ids, local.offset, local.count, local.tile, fill=check.POISON_METADATA)
            metadata[:written.size] = written
        fault(buffers.ids.numpy(), buffers.weights.view(torch.int32).numpy(), metadata, rows, local)

    return call_route


def _fake_cute(fault):
    """properties.implementations' "cute" stand-in: the model's Outputs, then ``fault``."""

    def run(case):
        out = REGISTRY["model"].run(case)
        ids, weights = out.ids.copy(), out.weights.copy()
        metadata = None if out.metadata is None else out.metadata.copy()
        fault(ids, weights.view(np.int32), metadata, case.logits, mutant_probe.from_routing_case(case).local)
        return Outputs(ids, weights, metadata)

    return Implementation("cute", run, lambda: None)


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    """The probe's differential path on CPU tensors, saving into tmp_path; returns a fault setter."""
    monkeypatch.setattr(mutant_probe, "DEVICE", "cpu")
    monkeypatch.setattr(mutant_probe, "_synchronize", lambda: None)
    monkeypatch.setattr(mutant_probe, "CORPUS_DIR", tmp_path)
    monkeypatch.setattr(routing, "prepare", lambda renormalize=True: None)

    def set_fault(fault):
        monkeypatch.setattr(check, "call_route", _fake_call_route(fault))
        monkeypatch.setitem(REGISTRY, "cute", _fake_cute(fault))

    return set_fault


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


def test_a_saved_case_whose_model_outputs_changed_is_refused(fake_gpu):
    fake_gpu(_flip_weights_of_rows_with_inf)
    path = mutant_probe.differential("fake_weights", "")["case"]
    record = casefile.read(path)
    model = record.outputs["model"]
    changed = Outputs(model.ids, (model.weights.view(np.uint32) ^ 1).view(np.float32), model.metadata)
    casefile.write(path, replace(record, outputs={**record.outputs, "model": changed}))
    with pytest.raises(RuntimeError, match="model's outputs changed"):
        mutant_probe.replay([path])


def test_an_exact_kernel_survives_the_whole_sweep(fake_gpu):
    fake_gpu(_no_fault)
    result = mutant_probe.differential("exact", "")
    plan = list(mutant_probe.case_plan(families(), batches))
    assert not result["killed"] and result["evidence"] == [f"{len(plan)} cases bit-exact"]


def test_the_sweep_covers_every_family_b_setting_scale_tile_and_request():
    plan = list(mutant_probe.case_plan(families(), batches))
    assert {c.label.split(" b=")[0] for c in plan} == {f.name for f in families()}
    assert {len(c.rows) for c in plan} == set(range(1, 9))
    assert {(c.renormalize, c.local is None) for c in plan} == {(r, m) for r in (True, False) for m in (True, False)}
    assert {np.float32(c.scale).view(np.uint32) for c in plan} == set(mutant_probe.SCALE_BITS)
    requests = [c for c in plan if c.local is not None]
    assert {c.local.tile for c in requests} == set(mutant_probe.TILES)
    kinds = {(c.local.offset == 0 and c.local.count == 256, c.local.count == 1, c.local.offset + c.local.count == 256)
             for c in requests}
    assert len(kinds) >= 4, kinds


# ---------------------------------------------------------------------------------------------- saved cases

@pytest.mark.parametrize("path", SAVED_CASES, ids=lambda p: p.stem)
def test_a_saved_minimal_case_still_holds_the_models_outputs_and_the_mutants_disagreement(path):
    record = casefile.read(path)
    name = record.origin["mutant"]
    assert name in {m.name for m in CATALOG}, f"{path.name}: no mutant {name} in the catalog"
    live = REGISTRY["model"].run(record.case)
    assert disagreements({"model": live, "recorded": record.outputs["model"]}) == [], path.name
    if "fault" not in record.origin:
        mutant = record.outputs[mutant_probe.MUTANT_PREFIX + name]
        assert disagreements({"model": live, "mutant": mutant}), f"{path.name}: the mutant's outputs are the model's"
