"""The mutant catalog on the CPU (properties/mutants.py).

Every edit still applies exactly once to the current kernel; the real kernel passes the static tier through
the same copy-and-subprocess path the mutants take (so no kill is vacuous); every mutant declared "static" is
killed by it; the equivalent edits escape it as their reasons say. The differential tier's own logic (sweep,
minimisation, case files, replay) runs here on a fake kernel: the NumPy model with one deliberate fault,
writing CPU tensors. Saved minimal cases (corpora/mutants/) must still hold the model's outputs.
"""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from kernel import check, routing
from kernel.layout import META_NUM_CTAS
from oracles.numpy_model import route as model_route
from oracles.numpy_model import routing_metadata
from properties import mutant_probe, mutants
from properties.mutants import CATALOG, EQUIVALENT, STATIC, MutantEditError
from triton_adversarial_rows import batches, families

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

def _fake_route(fault):
    """check.call_route stand-in: the model's outputs written into the (CPU) buffers, then ``fault``."""

    def call_route(buffers, scale, renormalize, local):
        rows, bias = buffers.logits.numpy(), buffers.bias.numpy()
        ids, weights = model_route(rows, bias, scale, renormalize)
        buffers.ids.copy_(torch.from_numpy(ids))
        buffers.weights.copy_(torch.from_numpy(weights))
        if local is not None:
            metadata = routing_metadata(ids, local.offset, local.count, local.tile, fill=check.POISON_METADATA)
            buffers.metadata_all[:metadata.size] = torch.from_numpy(metadata)
        fault(buffers, rows, local)

    return call_route


def _flip_weights_of_rows_with_inf(buffers, rows, local):
    for row in np.flatnonzero(np.isposinf(rows).any(axis=1)):
        buffers.weights.view(torch.int32)[row, 0] ^= 1


def _extra_cta_from_tile_3(buffers, rows, local):
    if local is not None and local.tile >= 3:
        buffers.metadata_all[META_NUM_CTAS] += 1


def _no_fault(buffers, rows, local):
    pass


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    """The probe's differential path on CPU tensors, saving into tmp_path; returns a fault setter."""
    monkeypatch.setattr(mutant_probe, "DEVICE", "cpu")
    monkeypatch.setattr(mutant_probe, "_synchronize", lambda: None)
    monkeypatch.setattr(mutant_probe, "_environment", lambda: {"gpu": "none: a fake kernel on the CPU"})
    monkeypatch.setattr(mutant_probe, "CORPUS_DIR", tmp_path)
    monkeypatch.setattr(routing, "prepare", lambda renormalize=True: None)
    return lambda fault: monkeypatch.setattr(check, "call_route", _fake_route(fault))


def test_a_weight_fault_is_found_minimised_to_one_row_saved_and_replayed(fake_gpu):
    fake_gpu(_flip_weights_of_rows_with_inf)
    result = mutant_probe.differential("fake_weights", "weights of rows with +inf flipped")
    assert result["killed"], result
    data, case = mutant_probe.read_case(result["case"])
    assert data["mutant"] == "fake_weights" and data["found"]["cases_tried"] >= 1
    assert len(case.rows) == 1 and np.isposinf(case.rows).any() and case.local is None
    assert case.scale == mutant_probe.SIMPLE_SCALE and not case.bias.any()
    assert any(line.startswith("weights") for line in data["mismatch"])
    kernel, model = (mutant_probe.decode_outputs(data["outputs"][k]) for k in ("kernel", "model"))
    assert np.array_equal(kernel[0], model[0]) and not np.array_equal(kernel[1], model[1])
    assert mutant_probe.replay([result["case"]])["killed"]
    fake_gpu(_no_fault)
    assert not mutant_probe.replay([result["case"]])["killed"]


def test_a_metadata_fault_keeps_the_metadata_and_the_smallest_failing_tile(fake_gpu):
    fake_gpu(_extra_cta_from_tile_3)
    result = mutant_probe.differential("fake_metadata", "one CTA too many from tile 3 on")
    _, case = mutant_probe.read_case(result["case"])
    assert result["killed"] and len(case.rows) == 1 and case.local.tile == 3, result


def test_a_saved_case_whose_model_outputs_changed_is_refused(fake_gpu, tmp_path):
    fake_gpu(_flip_weights_of_rows_with_inf)
    path = Path(mutant_probe.differential("fake_weights", "")["case"])
    data = json.loads(path.read_text())
    data["outputs"]["model"]["weights"][0] = "00000000*8"
    path.write_text(json.dumps(data))
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


def test_case_words_round_trip():
    words = np.array([0, 0, 0, 0xFFFFFFFF, 7, 7, 0x5A5A5A5A], np.uint32)
    text = mutant_probe.encode_words(words)
    assert text == "00000000*3 ffffffff 00000007*2 5a5a5a5a"
    assert np.array_equal(mutant_probe.decode_words(text), words)


# ---------------------------------------------------------------------------------------------- saved cases

@pytest.mark.parametrize("path", SAVED_CASES, ids=lambda p: p.stem)
def test_a_saved_minimal_case_still_holds_the_models_outputs_and_a_mismatch(path):
    data, case = mutant_probe.read_case(path)
    assert data["mutant"] in {m.name for m in CATALOG}, f"{path.name}: no such mutant in the catalog"
    want = check.expected(case.rows, case.bias, case.scale, case.renormalize, case.local)
    saved = mutant_probe.decode_outputs(data["outputs"]["model"])
    for field, a, b in zip(("ids", "weights", "metadata"), want, saved):
        assert (a is None and b is None) or np.array_equal(a, b), f"{path.name}: the model's {field} changed"
    if "error" not in data["outputs"]["kernel"]:
        kernel = mutant_probe.decode_outputs(data["outputs"]["kernel"])
        assert any((a is None) != (b is None) or (a is not None and not np.array_equal(a, b))
                   for a, b in zip(kernel, saved)), f"{path.name}: the saved kernel outputs equal the model's"
