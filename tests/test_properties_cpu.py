"""CPU tier of the property harness.

Each generator makes the edge case it is named for; on those cases the NumPy model picks the stable order of
c = s + bias, routes each row as if alone, and writes metadata that keeps every invariant; the invariant
checker catches any single-element change; case files keep every bit; and the planted tie fault is
caught, saved once, and replayed from the saved file.
"""

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import oracles.numpy_model as model
from kernel.layout import EXPERTS, EXPERTS_PER_LANE, TOP_K, metadata_size
from oracles.numpy_model.primitives import LOG2E
from properties.corpus import draw_cases
from properties.engine import casefile
from properties.engine.cases import RoutingCase
from properties.engine.floats import f32, f32_bits
from properties.engine.implementations import PLANTED_TIE_FAULT, run_all
from properties.engine.invariants import metadata_violations
from properties.engine.poison import METADATA_POISON
from properties.inputs import edge_cases
from properties.inputs.draws import local_ranges
from properties.inputs.families import families
from properties.inputs.strategies import GENERATORS, TESTFLOAT_EXPONENTS, TESTFLOAT_SIGNIFICANDS, any_case

DIV_FULL_SCALING_T = 126.0  # 1 + 2^t > 2^126 above it
EX2_OVERFLOW_T = 128.0  # 2^t overflows from it on
_MIN_NORMAL = np.float32(2.0**-126)
_ZERO_BITS = {0x00000000, 0x80000000}


def _scores(case):
    """(s, c) of the model: sigmoid scores and choice values, float32 [b, 256]."""
    s = model.sigmoid_f32(case.logits)
    return s, model.add_rn(s, np.ascontiguousarray(np.broadcast_to(case.bias, s.shape)))


def _t(logits):
    """Triton's exponent t = (0 - g) * log2 e in float32 (IEEE sub and mul, as the H200's FADD/FMUL)."""
    with np.errstate(over="ignore"):
        return (np.float32(0) - logits) * f32(LOG2E)


def _top_region(c_row):
    """Mask of the experts whose c is at least the 8th largest."""
    return c_row >= np.sort(c_row)[::-1][TOP_K - 1]


def _tied_groups(c_row, mask):
    """Lists of experts (within ``mask``) sharing one c, for every c shared by two or more."""
    experts = np.flatnonzero(mask)
    values, inverse, counts = np.unique(c_row[experts], return_inverse=True, return_counts=True)
    return [experts[inverse == i] for i in np.flatnonzero(counts > 1)]


def _tie_in_top(c, same_lane):
    """Whether some row holds two experts with one c, at least the 8th largest, in one lane (or in two)."""
    for row in c:
        for group in _tied_groups(row, _top_region(row)):
            lanes = np.unique(group // EXPERTS_PER_LANE).size
            if (lanes < group.size) if same_lane else (lanes > 1):
                return True
    return False


def _tie_at_eighth(case, c, ids, w):
    for row, picks in zip(c, ids):
        rest = np.delete(row, picks)
        if row[picks[-1]] == rest.max():
            return True
    return False


def _rounding_tie(case, c, ids, w):
    for r, row in enumerate(c):
        for group in _tied_groups(row, _top_region(row)):
            if np.unique(f32_bits(case.logits[r, group])).size > 1:
                return True
    return False


def _is_subnormal(x):
    return (x != 0) & (np.abs(x) < _MIN_NORMAL)


def _random_row(row):
    return np.unique(f32_bits(row)).size >= 200 and np.unique(f32_bits(row) >> 23 & 0xFF).size >= 64


def _testfloat_row(row):
    bits = f32_bits(row)
    tabled = np.isin(bits >> 23 & 0xFF, TESTFLOAT_EXPONENTS) & np.isin(bits & 0x7FFFFF, TESTFLOAT_SIGNIFICANDS)
    return tabled.mean() >= 0.5


# generator -> predicate(case, c, ids, weights): the one case drawn has the edge case the generator is named for
# (not properties/inputs/edge_cases.py's catalog of names, edge_cases.EDGE_CASES).
CASE_HAS_EDGE_CASE = {
    "tie_within_lane": lambda case, c, ids, w: _tie_in_top(c, same_lane=True),
    "tie_across_lanes": lambda case, c, ids, w: _tie_in_top(c, same_lane=False),
    "tie_at_eighth_place": _tie_at_eighth,
    "all_equal": lambda case, c, ids, w: bool((c == c[:, :1]).all()),
    "rounding_tie": _rounding_tie,
    "subnormal_values": lambda case, c, ids, w: _is_subnormal(case.logits).any() and _is_subnormal(case.bias).any(),
    "signed_zeros": lambda case, c, ids, w: _ZERO_BITS <= set(
        np.concatenate([f32_bits(case.logits).ravel(), f32_bits(case.bias)]).tolist()),
    "minus_inf_bias": lambda case, c, ids, w: bool((case.bias == -np.inf).any()),
    "infinite_logits": lambda case, c, ids, w: bool(np.isinf(case.logits).any()),
    "div_full_scaling": lambda case, c, ids, w: bool(((_t(case.logits) > DIV_FULL_SCALING_T)
                                                      & (_t(case.logits) < EX2_OVERFLOW_T)).any()),
    "ex2_overflow": lambda case, c, ids, w: bool((_t(case.logits) >= EX2_OVERFLOW_T).any()),
    "saturated_score": lambda case, c, ids, w: bool((model.sigmoid_f32(case.logits) == 1.0).any()),
    "bias_dominates": lambda case, c, ids, w: bool((np.abs(case.bias) >= 2).all()),
    "random_bits": lambda case, c, ids, w: all(_random_row(row) for row in case.logits) and _random_row(case.bias),
    "testfloat_patterns": lambda case, c, ids, w: all(_testfloat_row(row) for row in case.logits),
    "weight_overflow": lambda case, c, ids, w: bool((~np.isfinite(w)).any()),
    "shared_experts": lambda case, c, ids, w: case.b >= 2 and bool(set.intersection(*map(set, ids.tolist()))),
}


def test_every_generator_has_an_edge_case_check():
    assert sorted(CASE_HAS_EDGE_CASE) == sorted(GENERATORS)


def test_generators_and_families_name_their_edge_cases_from_one_catalog():
    """Every name of properties/inputs/edge_cases.py is used, and only those (an unknown name fails at import)."""
    assert set(GENERATORS) | {family.name for family in families()} == set(edge_cases.EDGE_CASES)
    with pytest.raises(ValueError, match="ties_at_the_eighth_place"):
        edge_cases.require(["tie_at_eighth_place", "ties_at_the_eighth_place"], "a test")


@pytest.mark.parametrize("generator", sorted(GENERATORS))
@given(data=st.data())
def test_generator_makes_its_edge_case(generator, data):
    case = data.draw(GENERATORS[generator], label="case")
    ids, weights = model.route(case.logits, case.bias, case.scale, case.renormalize)
    _, c = _scores(case)
    assert CASE_HAS_EDGE_CASE[generator](case, c, ids, weights), f"{generator} drew a case without its edge case"


def _stable_top8(c_row):
    """The 8 experts of largest c, the lower index first among equals (Python floats: -0.0 == +0.0)."""
    return sorted(range(EXPERTS), key=lambda e: (-float(c_row[e]), e))[:TOP_K]


@pytest.mark.parametrize("generator", sorted(GENERATORS))
@given(data=st.data())
def test_model_picks_the_stable_order_of_c(generator, data):
    case = data.draw(GENERATORS[generator], label="case")
    ids, _ = model.route(case.logits, case.bias, case.scale, case.renormalize)
    _, c = _scores(case)
    assert ids.tolist() == [_stable_top8(row) for row in c]


def _bits(outputs):
    return outputs.ids, f32_bits(outputs.weights)


@pytest.mark.parametrize("generator", sorted(GENERATORS))
@given(data=st.data())
def test_model_routes_each_row_as_if_alone(generator, data):
    case = data.draw(GENERATORS[generator], label="case")
    whole = run_all(case, ["model"])["model"]
    order = data.draw(st.permutations(range(case.b)), label="row order")
    shuffled = run_all(case.with_rows(order, "rows permuted"), ["model"])["model"]
    for position, row in enumerate(order):
        alone = run_all(case.with_rows([row], "row alone"), ["model"])["model"]
        for got, again, want in zip(_bits(alone), _bits(shuffled), _bits(whole)):
            assert np.array_equal(got[0], want[row]) and np.array_equal(again[position], want[row])


@pytest.mark.parametrize("generator", sorted(GENERATORS))
@given(data=st.data())
def test_model_metadata_keeps_every_invariant(generator, data):
    case = data.draw(GENERATORS[generator], label="case")
    tile = data.draw(st.integers(1, 12) | st.sampled_from([16, 64, 255, 256]), label="tile_n")
    offset, count = data.draw(local_ranges(), label="local range")
    ids, _ = model.route(case.logits, case.bias, case.scale, case.renormalize)
    meta = model.routing_metadata(ids, offset, count, tile, fill=METADATA_POISON)
    assert metadata_violations(ids, offset, count, tile, meta, METADATA_POISON) == []


@given(case=any_case(), tile=st.integers(1, 4), local=local_ranges(), data=st.data())
def test_invariants_catch_any_single_element_change(case, tile, local, data):
    """The checker can fail: every change of one metadata element, anywhere, breaks an invariant."""
    ids, _ = model.route(case.logits, case.bias, case.scale, case.renormalize)
    meta = model.routing_metadata(ids, *local, tile, fill=METADATA_POISON)
    index = data.draw(st.integers(0, metadata_size(tile) - 1), label="index")
    meta[index] = data.draw(st.integers(-2**31, 2**31 - 1).filter(lambda v: v != meta[index]), label="value")
    assert metadata_violations(ids, *local, tile, meta, METADATA_POISON) != []


@pytest.mark.long
@given(case=any_case())
def test_case_files_keep_every_bit(case):
    outputs = run_all(case, ["model"])
    record = casefile.CaseFile(case, outputs, casefile.recording(outputs), {"generator": case.generator}, [])
    again = casefile.from_json(json.loads(json.dumps(casefile.to_json(record))))
    assert again.case.same_inputs(case) and again.case.generator == case.generator
    for field in ("ids", "weights", "metadata"):
        want, got = getattr(outputs["model"], field), getattr(again.outputs["model"], field)
        assert (got is None) == (want is None)
        if want is not None:
            assert got.dtype == want.dtype and np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_corpus_draws_are_deterministic():
    for generator in ("tie_within_lane", "random_bits", "shared_experts"):
        first, second = draw_cases(generator, 3), draw_cases(generator, 3)
        assert all(a.same_inputs(b) for a, b in zip(first, second)) and len(first) == 3


@pytest.mark.long
def test_the_planted_fault_is_saved_once_and_replays_on_the_cpu(capture_fault, replay_process):
    saved = capture_fault(["model"])
    record = casefile.read(saved)
    assert record.disagreements[0]["implementation"] == PLANTED_TIE_FAULT
    assert record.origin["property"] == "implementations agree"
    assert record.origin["reproduce_failure"].startswith("@reproduce_failure(")
    assert not np.array_equal(record.outputs[PLANTED_TIE_FAULT].ids, record.outputs["model"].ids)
    recorded = replay_process(saved, planted=False)
    assert recorded.returncode == 1, recorded.stdout + recorded.stderr
    assert "REPRODUCED" in recorded.stdout and f"{PLANTED_TIE_FAULT} (recorded) ids vs model" in recorded.stdout
    live = replay_process(saved, planted=True)
    assert live.returncode == 1 and f"\n    {PLANTED_TIE_FAULT} ids vs model" in live.stdout


@pytest.mark.parametrize("offset, count", [(0, 0), (0, EXPERTS), (EXPERTS, 0), (EXPERTS - 1, 1)])
def test_case_files_keep_the_ends_of_the_local_range(offset, count):
    """The ends of the local range the contract allows (0 <= offset <= EXPERTS, an empty range at either end)
    round-trip through a case file; the schema once refused offset EXPERTS, found by the gpu profile on the H200."""
    rng = np.random.default_rng(offset + count)
    case = RoutingCase(rng.standard_normal((1, EXPERTS), dtype=np.float32), np.zeros(EXPERTS, np.float32),
                       np.float32(1.0), False, 1, offset, count, "local_range_ends")
    outputs = run_all(case, ["model"])
    record = casefile.CaseFile(case, outputs, casefile.recording(outputs), {"generator": case.generator}, [])
    again = casefile.from_json(json.loads(json.dumps(casefile.to_json(record))))
    assert again.case.same_inputs(case)
