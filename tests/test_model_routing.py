"""route and routing_metadata of the NumPy model on cases whose answers are derived by hand in comments, or
in exact rational arithmetic (``_rn``: round to the nearest float32, ties to even) from the H200's measured
tables, never from the model's output.

Facts used, each recorded from the H200 in oracles/mufu/data (test_the_table_entries_used_here_are_measured):
sigmoid(0) = 0.5, sigmoid(+inf) = 1.0, sigmoid(-inf) = +0.0 (the proof file covers every input); MUFU.EX2 of an
integer n is 2^n (EX2 entry 0 is 1.0; the integer part only moves the exponent); MUFU.RCP of a power of two is
exact (RCP entry 0 is 1.0), so div_full(x, 2^k) = x * 2^-k for the small values below, and MUFU.RCP(1 + 2^-23)
= 1 - 2^-23 (RCP entry 1 is 0x3F7FFFFE); 1e-15 is absorbed by any total >= 2^-20. Hence sigmoid(x) = 2^-n
when (0 - x) * log2e rounds to the integer n >= 25: 1 + 2^n rounds to 2^n.
"""

from fractions import Fraction

import numpy as np
import pytest

import oracles.numpy_model as model
from kernel.layout import (
    META_CTA_BATCH,
    META_CTA_LIMIT,
    META_EXPANDED_TO_PERMUTED,
    META_NUM_CTAS,
    META_PADDED_TOKENS,
    META_PERMUTED_TO_TOKEN,
    ROUTES,
    metadata_size,
)

FILL = -12345
LOG2E_BITS, EPS_BITS = 0x3FB8AA3B, 0x26901D7D  # Triton's float32 log2(e); float32(1e-15)
EPS_1E20_BITS = 0x1E3CE508  # float32(1e-20), the eps a wrong model might use
RCP_OF_ONE_PLUS_ULP = 0x3F7FFFFE  # MUFU.RCP(1 + 2^-23) on the H200: entry 1 of the RCP table
# Logits x with (0 - x) * log2e rounding to exactly 25 and 29 (checked by test_the_logits_give_powers_of_two).
X_25, X_29 = 0xC18AA123, 0xC1A0CF66


def _value(bits):
    return Fraction(float(np.uint32(bits).view(np.float32)))


def _rn(q):
    """The float32 nearest the rational ``q`` (ties to even), for results in the normal range."""
    if q == 0:
        return Fraction(0)
    exponent = 0
    while abs(q) >= 2 ** (exponent + 1):
        exponent += 1
    while abs(q) < 2 ** exponent:
        exponent -= 1
    ulp = Fraction(2) ** (exponent - 23)
    units, rest = divmod(abs(q) / ulp, 1)
    units = int(units) + (rest > Fraction(1, 2) or (rest == Fraction(1, 2) and int(units) % 2 == 1))
    return (1 if q > 0 else -1) * units * ulp


def _sum_in_order(values):
    """0.0 + v_0 + v_1 + ..., each addition rounded to float32."""
    total = Fraction(0)
    for v in values:
        total = _rn(total + v)
    return total


def _f32(values):
    return np.array([float(v) for v in values], np.float32)


def _row(value=0.0):
    return np.full((1, 256), value, np.float32)


def _bias(value=0.0):
    return np.full(256, value, np.float32)


def _bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


def test_public_names_are_exactly_the_contract():
    assert sorted(model.__all__) == sorted([
        "add_rn", "mul_rn", "ex2_approx_ftz_f32", "ex2_approx_f32", "rcp_approx_ftz_f32", "div_full_f32",
        "sigmoid_f32", "route", "routing_metadata"])


def test_hand_facts_hold_in_the_model():
    s = model.sigmoid_f32(np.array([0.0, -0.0, np.inf, -np.inf], np.float32))
    assert _bits(s).tolist() == _bits([0.5, 0.5, 1.0, 0.0]).tolist()
    assert _bits(model.rcp_approx_ftz_f32(np.array([4.0, 0.25], np.float32))).tolist() == _bits([0.25, 4.0]).tolist()


def test_all_equal_scores_pick_the_lowest_experts():
    # c = 0.5 everywhere: ids 0..7; total 4.0 (+1e-15 absorbed); inv = 1/4; w = 0.5 * 0.25.
    ids, w = model.route(_row(), _bias(), 1.0)
    assert ids.tolist() == [list(range(8))]
    assert _bits(w).tolist() == [_bits([0.125] * 8).tolist()]


def test_tie_at_eighth_and_ninth_place_goes_to_the_lower_expert():
    bias = _bias()
    bias[[60, 3, 50, 10, 40, 20, 30]] = 1.0  # seven clear winners, c = 1.5
    bias[[100, 90]] = 0.5  # tie for the eighth place, c = 1.0
    ids, w = model.route(_row(), bias, 2.5)
    assert ids.tolist() == [[3, 10, 20, 30, 40, 50, 60, 90]]
    # inv = div_full(2.5, 4.0) = 0.625; w = 0.5 * 0.625 = 0.3125: weights use s, not c.
    assert _bits(w).tolist() == [_bits([0.3125] * 8).tolist()]


def test_all_minus_inf_still_picks_eight_distinct_experts():
    ids, w = model.route(_row(), _bias(-np.inf), 1.0)
    assert ids.tolist() == [list(range(8))]
    assert _bits(w).tolist() == [_bits([0.125] * 8).tolist()]


def test_minus_inf_on_all_but_three_experts():
    bias = _bias(-np.inf)
    bias[[250, 100, 200]] = 0.0
    ids, w = model.route(_row(), bias, 1.0)
    assert ids.tolist() == [[100, 200, 250, 0, 1, 2, 3, 4]]
    # Every pick has s = sigmoid(0) = 0.5 (the bias only orders them): total 4.0, w = 0.5 * 0.25.
    assert _bits(w).tolist() == [_bits([0.125] * 8).tolist()]


def test_minus_zero_ties_with_plus_zero():
    # s = sigmoid(-inf) = +0 everywhere; c = +0 + (-0) = +0 at 5 and +0 + +0 = +0 at 2: a tie, 2 first.
    bias = _bias(-1.0)
    bias[5], bias[2] = -0.0, 0.0
    ids, w = model.route(_row(-np.inf), bias, 1.0)
    assert ids.tolist() == [[2, 5, 0, 1, 3, 4, 6, 7]]
    # total = +0; 0 + 1e-15 = 1e-15; every weight is +0 * inv = +0.
    assert _bits(w).tolist() == [[0] * 8]


def test_minus_zero_logit_scores_like_plus_zero():
    logits = _row()
    logits[0, 7] = -0.0
    ids, w = model.route(logits, _bias(), 1.0)
    assert ids.tolist() == [list(range(8))]
    # sigmoid(-0.0) = 0.5 like sigmoid(+0.0): total 4.0, w = 0.125 each.
    assert _bits(w).tolist() == [_bits([0.125] * 8).tolist()]


def test_bias_dominates_selection_but_not_the_weights():
    logits = _row()
    logits[0, :8] = np.inf  # s = 1.0 on experts 0..7
    bias = _bias()
    bias[248:252], bias[252:] = 10.0, 20.0  # c = 10.5 on experts 248..251, 20.5 on 252..255
    ids, w = model.route(logits, bias, 1.0)
    assert ids.tolist() == [list(range(252, 256)) + list(range(248, 252))]
    # s = 0.5 on every pick: total 4.0, w = 0.125 (weights of c would be 20.5 / 124 and 10.5 / 124).
    assert _bits(w).tolist() == [_bits([0.125] * 8).tolist()]


def test_weights_follow_pick_order_and_renormalize_flag():
    logits, bias = _row(), _bias()
    logits[0, [7, 9]] = np.inf  # s = 1, c = 1.0
    bias[[11, 12, 13, 14]] = 0.75  # s = 0.5, c = 1.25
    logits[0, [0, 1]] = -np.inf  # s = 0, c = 0.9
    bias[[0, 1]] = 0.9
    ids, w = model.route(logits, bias, 2.5)
    assert ids.tolist() == [[11, 12, 13, 14, 7, 9, 0, 1]]
    # total = 0.5 * 4 + 1 + 1 + 0 + 0 = 4.0; inv = 2.5 / 4 = 0.625.
    assert _bits(w).tolist() == [_bits([0.3125] * 4 + [0.625] * 2 + [0.0] * 2).tolist()]
    _, w = model.route(logits, bias, 2.5, renormalize=False)
    assert _bits(w).tolist() == [_bits([1.25] * 4 + [2.5] * 2 + [0.0] * 2).tolist()]


def test_rows_are_independent():
    bias = _bias()
    bias[[100, 90]] = 0.5
    logits = np.zeros((3, 256), np.float32)
    logits[1] = -np.inf
    ids, w = model.route(logits, bias, 1.0)
    # Rows 0 and 2: c = 1.0 at 90 and 100, 0.5 elsewhere; s = 0.5 everywhere, w = 0.125. Row 1: s = 0, w = +0.
    assert ids.tolist() == [[90, 100, 0, 1, 2, 3, 4, 5]] * 3
    assert _bits(w).tolist() == [_bits([0.125] * 8).tolist(), [0] * 8, _bits([0.125] * 8).tolist()]
    for r in range(3):
        ids_r, w_r = model.route(logits[r:r + 1], bias, 1.0)
        assert ids[r].tolist() == ids_r[0].tolist() and _bits(w[r]).tolist() == _bits(w_r[0]).tolist()


@pytest.mark.parametrize("kwargs,needle", [
    (dict(logits=np.zeros((1, 256), np.float64)), "logits must be a float32"),
    (dict(logits=np.zeros((1, 255), np.float32)), "logits must have shape"),
    (dict(logits=np.zeros((0, 256), np.float32)), "logits must have shape"),
    (dict(logits=np.full((1, 256), np.nan, np.float32)), "logits holds NaN"),
    (dict(bias=np.zeros((2, 256), np.float32)), "bias must have shape"),
    (dict(bias=np.full(256, np.nan, np.float32)), "bias holds NaN"),
    (dict(scale=float("nan")), "scale must be finite"),
    (dict(scale=1e39), "scale must be finite"),
    (dict(scale="1"), "scale must be a real number"),
])
def test_route_rejects_inputs_outside_the_contract(kwargs, needle):
    args = dict(logits=np.zeros((1, 256), np.float32), bias=np.zeros(256, np.float32), scale=1.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=needle):
        model.route(**args)


# ---------------------------------------------------------------------------------------------- the weight sum

def test_the_table_entries_used_here_are_measured():
    from oracles.mufu import tables

    measured, _ = tables.load()
    assert int(measured["ex2_pos"][0]) == 0x3F800000 and int(measured["rcp"][0]) == 0x3F800000
    assert int(measured["rcp"][1]) == RCP_OF_ONE_PLUS_ULP


@pytest.mark.parametrize("x_bits,n", [(X_25, 25), (X_29, 29)])
def test_the_logits_give_powers_of_two(x_bits, n):
    assert _rn(-_value(x_bits) * _value(LOG2E_BITS)) == n and _rn(1 + Fraction(2) ** n) == 2 ** n
    s = model.sigmoid_f32(np.array([x_bits], np.uint32).view(np.float32))
    assert _bits(s).tolist() == _bits(_f32([Fraction(1, 2 ** n)])).tolist()


def test_the_weight_sum_runs_in_pick_order_rounding_each_step():
    """Picks s = 1, then seven 2^-25: in pick order each 2^-25 is absorbed (below half an ulp of 1); in any
    other order, or summed exactly and rounded once, the small ones add up first and the total is not 1."""
    logits, bias = _row(-np.inf), _bias(-1.0)  # s = 0, c = -1 on the unpicked experts
    logits[0, 200], bias[200] = np.inf, 0.0  # s = 1, c = 1: the first pick, though its index is the highest
    logits[0, 10:17] = np.uint32(X_25).view(np.float32)
    bias[10:17] = 0.5  # c = 0.5 + 2^-25, a tie rounded to even: 0.5, so 10..16 follow in index order
    scale = Fraction(5, 2)
    ids, w = model.route(logits, bias, float(scale))
    assert ids.tolist() == [[200, 10, 11, 12, 13, 14, 15, 16]]
    picked = [Fraction(1)] + [Fraction(1, 2 ** 25)] * 7
    total = _sum_in_order(picked)
    assert total == 1 and _sum_in_order(picked[::-1]) == _rn(sum(picked)) == 1 + Fraction(1, 2 ** 22)
    assert _rn(total + _value(EPS_BITS)) == 1  # eps absorbed: div_full(2.5, 1) = 2.5 * MUFU.RCP(1) = 2.5
    inverse = _rn(scale * 1)
    assert _bits(w).tolist() == [_bits(_f32([_rn(s * inverse) for s in picked])).tolist()]


def test_the_eps_is_float32_1e_15_added_to_the_total():
    """Eight picks s = 2^-29 sum to 2^-26 in any order; 2^-26 + float32(1e-15) rounds up one ulp (1e-15 is
    above half of 2^-49), while 2^-26 + 1e-20 would stay 2^-26 and give weights of exactly 1/8."""
    logits = _row(-np.inf)
    logits[0, :8] = np.uint32(X_29).view(np.float32)
    ids, w = model.route(logits, _bias(), 1.0)
    assert ids.tolist() == [list(range(8))]
    s = Fraction(1, 2 ** 29)
    total = _sum_in_order([s] * 8)
    denominator = _rn(total + _value(EPS_BITS))
    assert total == Fraction(1, 2 ** 26) and denominator == total * (1 + Fraction(1, 2 ** 23))
    assert _rn(total + _value(EPS_1E20_BITS)) == total
    # div_full(1.0, 2^-26 (1 + 2^-23)) = MUFU.RCP: the exponent negated, the significand from RCP entry 1.
    inverse = 2 ** 26 * _value(RCP_OF_ONE_PLUS_ULP)
    assert _bits(w).tolist() == [_bits(_f32([_rn(s * inverse)] * 8)).tolist()]
    assert _bits(w).tolist() != [_bits([0.125] * 8).tolist()]


def _two_tokens():
    return np.array([list(range(8)), list(range(4, 12))], np.int32)


def test_metadata_all_local_tile_4():
    # Experts 0-3 hold token 0, 4-7 tokens 0 and 1, 8-11 token 1: one CTA each, CTA e belongs to expert e.
    meta = model.routing_metadata(_two_tokens(), 0, 256, 4, fill=FILL)
    assert meta.shape == (metadata_size(4),) and meta.dtype == np.int32
    assert meta[META_PADDED_TOKENS] == 48 and meta[META_NUM_CTAS] == 12
    counts = [1] * 4 + [2] * 4 + [1] * 4
    assert meta[META_CTA_BATCH:META_CTA_BATCH + 12].tolist() == list(range(12))
    assert meta[META_CTA_LIMIT:META_CTA_LIMIT + 12].tolist() == [4 * e + counts[e] for e in range(12)]
    rows = [[0, -1, -1, -1]] * 4 + [[0, 1, -1, -1]] * 4 + [[1, -1, -1, -1]] * 4
    assert meta[META_PERMUTED_TO_TOKEN:META_PERMUTED_TO_TOKEN + 48].tolist() == sum(rows, [])
    expanded = [4 * k for k in range(8)] + [4 * (4 + k) + 1 for k in range(4)] + [4 * e for e in range(8, 12)]
    assert meta[META_EXPANDED_TO_PERMUTED:META_EXPANDED_TO_PERMUTED + 16].tolist() == expanded
    _assert_untouched(meta, routes=16, ctas=12, padded=48)


def test_metadata_one_rank_of_four_experts_tile_3():
    meta = model.routing_metadata(_two_tokens(), 4, 4, 3, fill=FILL)
    assert meta[META_PADDED_TOKENS] == 12 and meta[META_NUM_CTAS] == 4
    assert meta[META_CTA_BATCH:META_CTA_BATCH + 4].tolist() == [0, 1, 2, 3]
    assert meta[META_CTA_LIMIT:META_CTA_LIMIT + 4].tolist() == [2, 5, 8, 11]
    assert meta[META_PERMUTED_TO_TOKEN:META_PERMUTED_TO_TOKEN + 12].tolist() == [0, 1, -1] * 4
    expanded = [-1] * 4 + [0, 3, 6, 9] + [1, 4, 7, 10] + [-1] * 4
    assert meta[META_EXPANDED_TO_PERMUTED:META_EXPANDED_TO_PERMUTED + 16].tolist() == expanded
    _assert_untouched(meta, routes=16, ctas=4, padded=12)


def test_metadata_tile_1_gives_one_cta_per_route():
    meta = model.routing_metadata(_two_tokens(), 4, 1, 1, fill=FILL)
    # Expert 4 holds tokens 0 and 1: two CTAs of one row each.
    assert meta[[META_PADDED_TOKENS, META_NUM_CTAS]].tolist() == [2, 2]
    assert meta[META_CTA_BATCH:META_CTA_BATCH + 2].tolist() == [0, 0]
    assert meta[META_CTA_LIMIT:META_CTA_LIMIT + 2].tolist() == [1, 2]
    assert meta[META_PERMUTED_TO_TOKEN:META_PERMUTED_TO_TOKEN + 2].tolist() == [0, 1]
    assert meta[META_EXPANDED_TO_PERMUTED + 4] == 0 and meta[META_EXPANDED_TO_PERMUTED + 8] == 1
    _assert_untouched(meta, routes=16, ctas=2, padded=2)


def test_metadata_of_a_rank_without_experts():
    meta = model.routing_metadata(_two_tokens(), 256, 0, 8, fill=FILL)
    assert meta[[META_PADDED_TOKENS, META_NUM_CTAS]].tolist() == [0, 0]
    assert meta[META_EXPANDED_TO_PERMUTED:META_EXPANDED_TO_PERMUTED + 16].tolist() == [-1] * 16
    _assert_untouched(meta, routes=16, ctas=0, padded=0)


def test_metadata_with_no_local_route():
    meta = model.routing_metadata(_two_tokens(), 200, 56, 8, fill=FILL)
    assert meta[[META_PADDED_TOKENS, META_NUM_CTAS]].tolist() == [0, 0]
    assert meta[META_EXPANDED_TO_PERMUTED:META_EXPANDED_TO_PERMUTED + 16].tolist() == [-1] * 16
    _assert_untouched(meta, routes=16, ctas=0, padded=0)


def _assert_untouched(meta, routes, ctas, padded):
    assert (meta[META_EXPANDED_TO_PERMUTED + routes:META_EXPANDED_TO_PERMUTED + ROUTES] == FILL).all()
    assert (meta[META_CTA_BATCH + ctas:META_CTA_LIMIT] == FILL).all()
    assert (meta[META_CTA_LIMIT + ctas:META_PERMUTED_TO_TOKEN] == FILL).all()
    assert (meta[META_PERMUTED_TO_TOKEN + padded:] == FILL).all()


@pytest.mark.parametrize("kwargs,needle", [
    (dict(ids=np.zeros((1, 8), np.int64)), "ids must be an int32"),
    (dict(ids=np.zeros((9, 8), np.int32)), "ids must have shape"),
    (dict(ids=np.full((1, 8), 256, np.int32)), "ids must lie in"),
    (dict(ids=np.zeros((1, 8), np.int32)), "must not repeat"),
    (dict(ids=np.array([[0, 1, 2, 3, 4, 5, 6, 6]], np.int32)), "must not repeat"),
    (dict(ids=np.zeros((1, 1, 8), np.int32)), "ids must have shape"),
    (dict(local_expert_offset=-1), "local_expert_offset"),
    (dict(local_expert_offset=250, num_local_experts=7), "num_local_experts"),
    (dict(tile_n=0), "tile_n"),
    (dict(tile_n=257), "tile_n"),
    (dict(fill=2**31), "fill"),
    (dict(tile_n=True), "tile_n"),
    (dict(num_local_experts=np.float32(4)), "num_local_experts"),
])
def test_routing_metadata_rejects_inputs_outside_the_contract(kwargs, needle):
    args = dict(ids=np.arange(8, dtype=np.int32)[None], local_expert_offset=0, num_local_experts=256, tile_n=8)
    args.update(kwargs)
    with pytest.raises(ValueError, match=needle):
        model.routing_metadata(**args)


def test_metadata_of_eight_tokens_on_one_expert_each():
    # Token t routes to experts 8t..8t+7; tile 8, all local: one CTA per expert, its row 0 token t.
    meta = model.routing_metadata(np.arange(64, dtype=np.int32).reshape(8, 8), 0, 256, 8, fill=FILL)
    assert meta[[META_PADDED_TOKENS, META_NUM_CTAS]].tolist() == [512, 64]
    assert meta[META_PERMUTED_TO_TOKEN:META_PERMUTED_TO_TOKEN + 16].tolist() == [0] + [-1] * 7 + [0] + [-1] * 7


def test_metadata_field_names_every_region_of_the_layout():
    from kernel.layout import metadata_field

    names = [metadata_field(i, 2) for i in (META_PADDED_TOKENS, META_NUM_CTAS, META_EXPANDED_TO_PERMUTED + 63,
                                            META_CTA_BATCH, META_CTA_LIMIT + 1, META_PERMUTED_TO_TOKEN - 1,
                                            META_PERMUTED_TO_TOKEN + 127, metadata_size(2) - 1)]
    assert names == ["padded_tokens[0]", "num_ctas[0]", "expanded_to_permuted[63]", "cta_batch[0]", "cta_limit[1]",
                     f"unused[{META_PERMUTED_TO_TOKEN - 1}]", "permuted_to_token[127]", "guard"]


@pytest.mark.parametrize("renormalize", [True, False])
def test_route_and_metadata_take_torch_tensors_and_give_the_numpy_bits(renormalize):
    """A CPU plug-in hands the model torch tensors: the same bits as from NumPy arrays, as tensors."""
    import torch

    rng = np.random.default_rng(6)
    logits, bias = rng.standard_normal((5, 256), dtype=np.float32), rng.standard_normal(256, dtype=np.float32)
    ids, w = model.route(logits, bias, 2.5, renormalize)
    ids_t, w_t = model.route(torch.from_numpy(logits), torch.from_numpy(bias), 2.5, renormalize)
    assert isinstance(ids_t, torch.Tensor) and ids_t.dtype == torch.int32 and w_t.dtype == torch.float32
    assert ids_t.numpy().tolist() == ids.tolist() and _bits(w_t.numpy()).tolist() == _bits(w).tolist()
    meta = model.routing_metadata(ids, 3, 200, 5, fill=-7)
    meta_t = model.routing_metadata(ids_t, 3, 200, 5, fill=-7)
    assert isinstance(meta_t, torch.Tensor) and meta_t.numpy().tolist() == meta.tolist()


@pytest.mark.parametrize("call,needle", [
    (lambda t: model.route(t.zeros((1, 256), dtype=t.float64), t.zeros(256), 1.0), "logits must be a float32"),
    (lambda t: model.route(t.zeros((1, 255)), t.zeros(256), 1.0), "logits must have shape"),
    (lambda t: model.route(t.full((1, 256), float("nan")), t.zeros(256), 1.0), "logits holds NaN"),
    (lambda t: model.route(t.zeros((1, 256)), np.zeros(256, np.float32), 1.0), "bias must be of the library"),
    (lambda t: model.route(t.zeros((1, 256)), t.zeros(256), float("nan")), "scale must be finite"),
    (lambda t: model.routing_metadata(t.zeros((1, 8), dtype=t.int64), 0, 256, 8), "ids must be an int32"),
    (lambda t: model.routing_metadata(t.zeros((1, 8), dtype=t.int32), 0, 256, 8), "must not repeat"),
    (lambda t: model.routing_metadata(t.full((1, 8), 256, dtype=t.int32), 0, 256, 8), "ids must lie in"),
    (lambda t: model.routing_metadata(t.arange(8, dtype=t.int32)[None], 0, 256, 0), "tile_n"),
], ids=["dtype", "shape", "nan", "mixed", "scale", "ids dtype", "repeat", "range", "tile"])
def test_torch_inputs_get_the_same_errors(call, needle):
    import torch

    with pytest.raises(ValueError, match=needle):
        call(torch)
