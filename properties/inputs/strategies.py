"""Hypothesis strategies of routing cases, each named for the edge case it makes.

Drawing 2,048 logits one by one costs about 50 µs each and overflows Hypothesis's per-example data, so a
case is a background from a seeded NumPy generator (its seed drawn, so it shrinks to 0) with the values that
matter drawn by Hypothesis on top: the planted ties, the boundary values, the edge-case pools (arrays of
independent elements, ``fill=st.nothing()``). ``GENERATORS`` maps each edge case's name (from the catalog
in properties/inputs/edge_cases.py) to its strategy.
Every strategy also draws the parameters (properties/inputs/draws.py): b, scale, renormalize and the metadata request.
"""

import hypothesis.extra.numpy as hnp
import numpy as np
from hypothesis import strategies as st

from kernel.layout import EXPERTS, EXPERTS_PER_LANE, TOP_K
from kernel.layout import WARP as LANES
from properties.engine.cases import RoutingCase
from properties.engine.floats import (
    MAX_SUBNORMAL,
    MIN_SUBNORMAL,
    MINUS_INF,
    PLUS_INF,
    SIGN,
    f32,
    f32_bits,
    random_non_nan,
)
from properties.inputs.draws import (
    FLT_MAX,
    any_value_bits,
    bound,
    float_bits,
    metadata_requests,
    scales,
    subnormal_bits,
    tiles,
    token_counts,
)
from properties.inputs.edge_cases import require

_POOL_MAX = 8

# How many experts of a row an edge case touches.
DENSITIES = {"one": (1, 1), "some": (2, TOP_K), "many": (TOP_K + 1, 127), "most": (128, EXPERTS - 1),
             "all": (EXPERTS, EXPERTS)}

# Saturation of Triton's sigmoid 1 / (1 + 2^t), t = (0 - g) * log2 e, in float32:
# 1 + 2^t > 2^126 (div.full scales both operands by 0.25) for t > 126, about g < -87.34;
# 2^t overflows (ex2.approx gives +inf, s = 0) for t >= 128, about g <= -88.72;
# 2^t < 2^-24 (1 + 2^t rounds to 1, s = 1) for t < -24, about g > 16.64.
DIV_FULL_SCALING_INNER = (-88.7, -87.4)
DIV_FULL_SCALING_REACH = (-88.75, -87.3)
EX2_OVERFLOW_INNER = (-200.0, -89.0)
EX2_OVERFLOW_EDGE = -88.7
SATURATED_SCORE_INNER = (17.0, 100.0)
SATURATED_SCORE_EDGE = 16.0

# TestFloat-style (Berkeley TestFloat, genCases_f32.c): biased exponents at the ends of the range, around
# 1 and around the saturation points (2^6 .. 2^7 covers 64 .. 128), and significands with runs of ones or
# zeros at either end; a random exponent or significand stands in for one of them now and then.
TESTFLOAT_EXPONENTS = (0, 1, 2, 63, 64, 65, 125, 126, 127, 128, 129, 130, 131, 132, 133, 134, 149, 150, 151,
                       190, 191, 253, 254, 255)
TESTFLOAT_SIGNIFICANDS = (0, 1, 2, 3, 0x7FFFFF, 0x7FFFFE, 0x7FFFFD, 0x400000, 0x400001, 0x3FFFFF, 0x200000,
                          0x100000, 0x555555, 0x2AAAAA, 0x7FF000, 0x000FFF, 0x7F8000, 0x0000FF)
_TESTFLOAT_RANDOM_EVERY = 8
# -inf bias counts around the 8 picks and at the ends.
MINUS_INF_COUNTS = (1, 7, 8, 9, 128, 247, 248, 249, 255, 256)
_INF_EXPONENT = 255


def _case(draw, generator, logits, bias, *, scale=None, renormalize=None, tile_strategy=None):
    """The RoutingCase of these inputs with drawn parameters (those not fixed by the generator)."""
    tile_n, offset, count = draw(metadata_requests(tile_strategy), label="metadata request")
    return RoutingCase(
        logits=np.ascontiguousarray(logits, np.float32), bias=np.ascontiguousarray(bias, np.float32),
        scale=draw(scales(), label="scale") if scale is None else scale,
        renormalize=draw(st.booleans(), label="renormalize") if renormalize is None else renormalize,
        tile_n=tile_n, local_expert_offset=offset, num_local_experts=count, generator=generator)


def _rng(draw):
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="background seed"))


def _ordinary_logits(rng, b):
    """Router-like logits: normal with a standard deviation of 0.5, 1 or 3."""
    return (rng.standard_normal((b, EXPERTS)) * rng.choice([0.5, 1.0, 3.0])).astype(np.float32)


def _ordinary_bias(rng):
    """Router-like correction bias: zeros (of either sign), or normal with a standard deviation of 0.001 or
    0.05."""
    return (rng.standard_normal(EXPERTS) * rng.choice([0.0, 1e-3, 0.05])).astype(np.float32)


def _background(draw):
    """(b, the seeded NumPy generator, router-like logits [b, 256], bias [256]) for edges planted on top."""
    b = draw(token_counts(), label="b")
    rng = _rng(draw)
    return b, rng, _ordinary_logits(rng, b), _ordinary_bias(rng)


def _count(draw, *densities):
    low, high = DENSITIES[draw(st.sampled_from(densities), label="density")]
    return draw(st.integers(low, high), label="experts touched")


def _pool(draw, elements, max_size, *, min_size=0, unique=False):
    """float32 array of independently drawn bit patterns."""
    size = draw(st.integers(min_size, max_size), label="pool size")
    return f32(draw(hnp.arrays(np.uint32, size, elements=elements, fill=st.nothing(), unique=unique)))


def _plant(draw, rng, row, count, numpy_values, elements):
    """Set ``count`` random experts of ``row``: drawn values (``elements``) on up to count - 1 of them, values
    from ``numpy_values(rng, n)`` on the rest (at least one)."""
    positions = rng.choice(EXPERTS, count, replace=False)
    row[positions] = numpy_values(rng, count)
    drawn = _pool(draw, elements, min(_POOL_MAX, count - 1))
    row[positions[:drawn.size]] = drawn


def _uniform(low, high):
    return lambda rng, n: rng.uniform(low, high, n).astype(np.float32)


def _one_of(*bits):
    return lambda rng, n: f32(rng.choice(np.array(bits, np.uint32), n))


def _tie_rows(draw, generator, group_positions, winners):
    """Each row: ``winners`` clear winners, then a group of experts with one logit v and one bias beta (an
    exact tie, ranked inside the top 8), then every other expert strictly below (logit below v - 1, bias at
    most beta). ``group_positions(draw, rng)`` places the group."""
    b = draw(token_counts(), label="b")
    rng = _rng(draw)
    beta = draw(st.floats(-4.0, 4.0, width=32), label="beta")
    logits = np.empty((b, EXPERTS), np.float32)
    planted = np.zeros(EXPERTS, bool)
    for r in range(b):
        v = draw(st.floats(-8.0, 8.0, width=32), label="tied logit")
        group = group_positions(draw, rng)
        rest = rng.permutation(np.setdiff1d(np.arange(EXPERTS), group))
        ahead = rest[:winners(draw)]
        logits[r] = v - 1 - rng.exponential(rng.choice([0.5, 4.0]), EXPERTS)
        logits[r, group] = v
        logits[r, ahead] = v + 1 + rng.uniform(0, 8, ahead.size)
        planted[group] = planted[ahead] = True
    bias = (beta - np.abs(rng.standard_normal(EXPERTS) * rng.choice([1e-3, 0.05]))).astype(np.float32)
    bias[planted] = beta
    return _case(draw, generator, logits, bias)


def _group_size(draw):
    return draw(st.integers(2, TOP_K), label="tie size")


@st.composite
def tie_within_lane(draw):
    """Exact ties among the 8 experts one lane holds, ranked inside the top 8."""
    def group(draw, rng):
        lane = draw(st.integers(0, LANES - 1), label="lane")
        slots = rng.choice(EXPERTS_PER_LANE, _group_size(draw), replace=False)
        return lane * EXPERTS_PER_LANE + slots
    return _tie_rows(draw, "tie_within_lane", group, lambda d: d(st.integers(0, TOP_K - 1), label="winners"))


@st.composite
def tie_across_lanes(draw):
    """Exact ties between experts of different lanes, ranked inside the top 8."""
    def group(draw, rng):
        lanes = rng.choice(LANES, _group_size(draw), replace=False)
        return lanes * EXPERTS_PER_LANE + rng.integers(0, EXPERTS_PER_LANE, lanes.size)
    return _tie_rows(draw, "tie_across_lanes", group, lambda d: d(st.integers(0, TOP_K - 1), label="winners"))


@st.composite
def tie_at_eighth_place(draw):
    """Seven clear winners, then an exact tie for the 8th place: the 9th expert loses on its index."""
    def group(draw, rng):
        return rng.choice(EXPERTS, _group_size(draw), replace=False)
    return _tie_rows(draw, "tie_at_eighth_place", group, lambda d: TOP_K - 1)


@st.composite
def all_equal(draw):
    """All 256 experts of a row equal: one logit per row (any value, infinities included), one bias."""
    b = draw(token_counts(), label="b")
    logits = np.repeat(_pool(draw, any_value_bits(), b, min_size=b)[:, None], EXPERTS, axis=1)
    bias = np.full(EXPERTS, f32(draw(any_value_bits(), label="bias")), np.float32)
    return _case(draw, "all_equal", logits, bias)


@st.composite
def rounding_tie(draw):
    """Distinct logits whose s + bias round to one value: s saturated at 1, s absorbed by a bias of 2^25 or
    more, or logits a few ulps apart whose s differ by less than an ulp of the bias (three or more of them, so
    at least two round together). The tied experts (the same ones in every row, each row with its own
    logits) rank above every other."""
    b, rng, logits, bias = _background(draw)
    kind = draw(st.sampled_from(["saturated", "absorbed", "merged"]), label="kind")
    beta = np.float32(draw({"saturated": st.floats(-4.0, 4.0, width=32),
                            "absorbed": st.floats(2.0**25, 2.0**60, width=32),
                            "merged": st.floats(16.0, bound(2.0**24 - 1), width=32)}[kind], label="beta"))
    size = draw(st.integers(3 if kind == "merged" else 2, TOP_K), label="tie size")
    positions = rng.choice(EXPERTS, size, replace=False)
    bias = np.minimum(bias, beta) if kind == "saturated" else np.full(EXPERTS, beta * np.float32(0.5))
    bias[positions] = beta
    for r in range(b):
        if kind == "saturated":
            values = _pool(draw, float_bits(SATURATED_SCORE_INNER[0], FLT_MAX), size, min_size=size, unique=True)
        elif kind == "absorbed":
            values = _pool(draw, float_bits(-30.0, 30.0), size, min_size=size, unique=True)
        else:
            base = int(f32_bits(draw(st.floats(0.0, 2.0, width=32), label="base")))
            steps = rng.choice(16, size, replace=False)
            values = f32(base + steps) * np.float32(draw(st.sampled_from([1, -1]), label="sign"))
        logits[r, positions] = values
    return _case(draw, "rounding_tie", logits, bias)


@st.composite
def subnormal_values(draw):
    """Subnormal logits (s = 0.5 exactly) and subnormal biases (absorbed by s), some to all of a row."""
    b, rng, logits, bias = _background(draw)
    numpy_subnormals = lambda rng, n: f32(rng.integers(MIN_SUBNORMAL, MAX_SUBNORMAL + 1, n) | (rng.integers(0, 2, n) << 31))
    for r in range(b):
        _plant(draw, rng, logits[r], _count(draw, *DENSITIES), numpy_subnormals, subnormal_bits())
    _plant(draw, rng, bias, _count(draw, *DENSITIES), numpy_subnormals, subnormal_bits())
    return _case(draw, "subnormal_values", logits, bias)


@st.composite
def signed_zeros(draw):
    """+0.0 and -0.0 side by side in the logits (both give s = 0.5) and in the bias (absorbed by s)."""
    b, rng, logits, bias = _background(draw)
    both = _one_of(0, SIGN)
    zeros = st.sampled_from([0, SIGN])
    for r in range(b):
        _plant(draw, rng, logits[r], _count(draw, "some", "many", "most", "all"), both, zeros)
        logits[r, rng.choice(EXPERTS, 2, replace=False)] = [0.0, -0.0]
    _plant(draw, rng, bias, _count(draw, "some", "many", "most", "all"), both, zeros)
    bias[rng.choice(EXPERTS, 2, replace=False)] = [0.0, -0.0]
    return _case(draw, "signed_zeros", logits, bias)


@st.composite
def minus_inf_bias(draw):
    """-inf bias on some, most or all experts: around 8 finite experts left, the picks reach into -inf."""
    b, rng, logits, bias = _background(draw)
    count = draw(st.one_of(st.sampled_from(MINUS_INF_COUNTS), st.integers(1, EXPERTS)),
                 label="-inf experts")
    bias[rng.choice(EXPERTS, count, replace=False)] = -np.inf
    return _case(draw, "minus_inf_bias", logits, bias)


@st.composite
def infinite_logits(draw):
    """+inf logits (s = 1) and -inf logits (s = 0), from one expert to every expert of a row."""
    b, rng, logits, bias = _background(draw)
    infinities = _one_of(PLUS_INF, MINUS_INF)
    for r in range(b):
        _plant(draw, rng, logits[r], _count(draw, *DENSITIES), infinities, st.sampled_from([PLUS_INF, MINUS_INF]))
    return _case(draw, "infinite_logits", logits, bias)


def _saturation_rows(draw, generator, densities, inner, reach):
    """Logits of rows with many experts in one saturation range: uniform in ``inner``, drawn in ``reach``."""
    b, rng, logits, bias = _background(draw)
    for r in range(b):
        _plant(draw, rng, logits[r], _count(draw, *densities), _uniform(*inner), float_bits(*reach))
    return _case(draw, generator, logits, bias)


@st.composite
def div_full_scaling(draw):
    """Logits below about -87.34, where 1 + 2^t > 2^126 and div.full scales its operands by 0.25; most or all
    experts, so that some are picked."""
    return _saturation_rows(draw, "div_full_scaling", ("most", "all"), DIV_FULL_SCALING_INNER,
                            DIV_FULL_SCALING_REACH)


@st.composite
def ex2_overflow(draw):
    """Logits at or below about -88.72, where 2^t overflows to +inf and s = 0; most or all experts."""
    return _saturation_rows(draw, "ex2_overflow", ("most", "all"), EX2_OVERFLOW_INNER, (-FLT_MAX, EX2_OVERFLOW_EDGE))


@st.composite
def saturated_score(draw):
    """Large positive logits, where s is exactly 1: from one expert to every expert of a row."""
    return _saturation_rows(draw, "saturated_score", tuple(DENSITIES), SATURATED_SCORE_INNER,
                            (SATURATED_SCORE_EDGE, FLT_MAX))


@st.composite
def bias_dominates(draw):
    """Biases of magnitude 2 .. 2^40 (some shared by several experts): the bias orders the experts and s only
    breaks the ties it survives."""
    b = draw(token_counts(), label="b")
    rng = _rng(draw)
    logits = _ordinary_logits(rng, b)
    magnitudes = 2.0 ** rng.uniform(1, 40, EXPERTS)
    bias = (magnitudes * rng.choice([-1, 1], EXPERTS)).astype(np.float32)
    shared = _pool(draw, float_bits(2.0, 2.0**40), _POOL_MAX, min_size=1)
    groups = rng.integers(0, shared.size, EXPERTS)
    take = rng.random(EXPERTS) < rng.choice([0.0, 0.1, 0.5])
    bias[take] = shared[groups[take]]
    return _case(draw, "bias_dominates", logits, bias)


@st.composite
def random_bits(draw):
    """Logits and bias of uniformly random non-NaN bit patterns."""
    b = draw(token_counts(), label="b")
    rng = _rng(draw)
    return _case(draw, "random_bits", random_non_nan(rng, (b, EXPERTS)), random_non_nan(rng, EXPERTS))


def _testfloat(rng, shape):
    """TestFloat-style patterns: sign x tabled exponent x tabled significand, each sometimes random."""
    exponents = rng.choice(np.array(TESTFLOAT_EXPONENTS, np.uint32), shape)
    significands = rng.choice(np.array(TESTFLOAT_SIGNIFICANDS, np.uint32), shape)
    exponents = np.where(rng.integers(0, _TESTFLOAT_RANDOM_EVERY, shape) == 0,
                         rng.integers(0, _INF_EXPONENT, shape), exponents).astype(np.uint32)
    significands = np.where(rng.integers(0, _TESTFLOAT_RANDOM_EVERY, shape) == 0,
                            rng.integers(0, 1 << 23, shape), significands).astype(np.uint32)
    significands[exponents == _INF_EXPONENT] = 0  # an infinity, never a NaN
    signs = rng.integers(0, 2, shape).astype(np.uint32) << 31
    return f32(signs | (exponents << 23) | significands)


@st.composite
def testfloat_patterns(draw):
    """Logits and bias of TestFloat-style exponent x significand patterns."""
    b = draw(token_counts(), label="b")
    rng = _rng(draw)
    return _case(draw, "testfloat_patterns", _testfloat(rng, (b, EXPERTS)), _testfloat(rng, EXPERTS))


@st.composite
def weight_overflow(draw):
    """Tiny scores (logits in [-80, -20]) with a scale of 1e37 or more: scale / total overflows to +inf and
    the weights are +inf (or NaN where an s is 0); renormalized, since s * scale alone cannot overflow."""
    b = draw(token_counts(), label="b")
    rng = _rng(draw)
    logits = rng.uniform(-80.0, -20.0, (b, EXPERTS)).astype(np.float32)
    for r in range(b):
        _plant(draw, rng, logits[r], _count(draw, "one", "some"), _uniform(*EX2_OVERFLOW_INNER),
               float_bits(-FLT_MAX, EX2_OVERFLOW_EDGE))
    scale = np.float32(draw(st.floats(bound(1e37), FLT_MAX, width=32), label="scale"))
    return _case(draw, "weight_overflow", logits, _ordinary_bias(rng), scale=scale, renormalize=True)


@st.composite
def shared_experts(draw):
    """Every token picks the same 8 experts, in one order or its own: the most tokens per expert, so CTAs
    fill and spill for small tiles."""
    b = draw(token_counts(min_value=2), label="b")
    rng = _rng(draw)
    winners = rng.choice(EXPERTS, TOP_K, replace=False)
    logits = rng.uniform(-4.0, 3.0, (b, EXPERTS)).astype(np.float32)
    same_order = draw(st.booleans(), label="same order")
    for r in range(b):
        order = winners if same_order else rng.permutation(winners)
        logits[r, order] = np.sort(rng.uniform(5.0, 9.0, TOP_K))[::-1]
    bias = (rng.standard_normal(EXPERTS) * rng.choice([0.0, 1e-3])).astype(np.float32)
    return _case(draw, "shared_experts", logits, bias, tile_strategy=st.one_of(st.integers(1, 9), tiles()))


GENERATORS = {
    "tie_within_lane": tie_within_lane(),
    "tie_across_lanes": tie_across_lanes(),
    "tie_at_eighth_place": tie_at_eighth_place(),
    "all_equal": all_equal(),
    "rounding_tie": rounding_tie(),
    "subnormal_values": subnormal_values(),
    "signed_zeros": signed_zeros(),
    "minus_inf_bias": minus_inf_bias(),
    "infinite_logits": infinite_logits(),
    "div_full_scaling": div_full_scaling(),
    "ex2_overflow": ex2_overflow(),
    "saturated_score": saturated_score(),
    "bias_dominates": bias_dominates(),
    "random_bits": random_bits(),
    "testfloat_patterns": testfloat_patterns(),
    "weight_overflow": weight_overflow(),
    "shared_experts": shared_experts(),
}


require(GENERATORS, "properties/inputs/strategies.py")


def any_case():
    """A case of any generator."""
    return st.one_of(*GENERATORS.values())
