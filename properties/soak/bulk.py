"""The catalog's edge cases made in bulk on a torch device: ``generate(family, generator, n, b, device)``
returns logits float32 [n, b, 256] and bias float32 [n, 256] for n problems of b rows.

Each family makes the edge case its namesake strategy in properties/inputs/strategies.py makes (same names, same
ranges and densities), drawn with torch from one seeded generator instead of Hypothesis; PLAIN is router-like
rows with nothing planted. Random bit patterns that would be NaN get their exponent cleared (a subnormal).
"""

import functools

import torch

from kernel.layout import EXPERTS, EXPERTS_PER_LANE, TOP_K, WARP
from properties.engine.floats import MAX_SUBNORMAL, PLUS_INF, SIGN
from properties.inputs.draws import FLT_MAX, SPECIAL_MAGNITUDES
from properties.inputs.strategies import (
    DENSITIES,
    DIV_FULL_SCALING_INNER,
    DIV_FULL_SCALING_REACH,
    EX2_OVERFLOW_EDGE,
    EX2_OVERFLOW_INNER,
    GENERATORS,
    MINUS_INF_COUNTS,
    SATURATED_SCORE_EDGE,
    SATURATED_SCORE_INNER,
    TESTFLOAT_EXPONENTS,
    TESTFLOAT_SIGNIFICANDS,
)

PLAIN = "plain"
WEIGHT_OVERFLOW = "weight_overflow"
LANES, PER_LANE = WARP, EXPERTS_PER_LANE
REACH_SHARE = 1 / 8  # of planted saturation values drawn anywhere in the reach range, not its inner part
TESTFLOAT_RANDOM_SHARE = 1 / 8
# As int32 words (torch has no uint32 arithmetic): the sign bit, the magnitude mask, the exponent field.
_SIGN, _ABS, _EXPONENT = SIGN - 2**32, SIGN - 1, PLUS_INF


@functools.lru_cache(maxsize=None)
def _constant(values, dtype, device):
    return torch.tensor(values, dtype=dtype, device=device)


def inverse_permutation(order):
    """The rank of each position in the permutations ``order`` (last axis): what ``order.argsort(-1)`` gives,
    by one scatter instead of a second sort."""
    positions = torch.arange(order.shape[-1], device=order.device).expand(order.shape)
    return torch.empty_like(order).scatter_(-1, order, positions)


class _Draw:
    """Random tensors from one generator on one device. Constant tables go to the device once per process
    (a copy from the host would make the host wait for the device's queue at every batch)."""

    def __init__(self, generator, device):
        self.g, self.device = generator, device

    def constant(self, values, dtype=torch.float32):
        """``values`` as a tensor on the device, made once per (values, dtype, device)."""
        return _constant(tuple(values), dtype, self.device)

    def uniform(self, shape, low, high):
        return torch.rand(shape, generator=self.g, device=self.device) * (high - low) + low

    def normal(self, shape):
        return torch.randn(shape, generator=self.g, device=self.device)

    def ints(self, low, high, shape):
        """int64 in [low, high)."""
        return torch.randint(low, high, shape, generator=self.g, device=self.device)

    def choice(self, values, shape, dtype=torch.float32):
        return self.constant(values, dtype)[self.ints(0, len(values), shape)]

    def bits(self, shape):
        """Uniform int32 bit patterns."""
        return (self.ints(0, 2**32, shape) - 2**31).to(torch.int32)

    def non_nan(self, shape):
        """Random float32 bit patterns, NaN patterns with their exponent cleared."""
        b = self.bits(shape)
        return torch.where((b & _ABS) > _EXPONENT, b & ~_EXPONENT, b).view(torch.float32)

    def between(self, shape, low, high):
        """Floats uniform in bit space between same-signed ``low`` and ``high``."""
        a, b = sorted(int(torch.tensor(abs(v), dtype=torch.float32).view(torch.int32)) for v in (low, high))
        magnitude = self.ints(a, b + 1, shape).to(torch.int32)
        return (magnitude | (_SIGN if low < 0 else 0)).view(torch.float32)

    def order(self, shape):
        """A random permutation (the experts in a random order) along the last axis of ``shape``."""
        return torch.rand(shape, generator=self.g, device=self.device).argsort(-1)

    def ranks(self, shape):
        """A random permutation rank (0 .. last) along the last axis of ``shape``: the inverse of ``order``."""
        return inverse_permutation(self.order(shape))

    def counts(self, shape, densities):
        """Experts touched per element of ``shape``, a density of ``densities`` each."""
        low = self.constant([DENSITIES[d][0] for d in densities], torch.int64)
        high = self.constant([DENSITIES[d][1] for d in densities], torch.int64)
        k = self.ints(0, len(densities), shape)
        return low[k] + (torch.rand(shape, generator=self.g, device=self.device) * (high[k] - low[k] + 1)).long()

    def plant(self, x, counts, values):
        """``x`` with ``counts`` random experts of each row (last axis) set from ``values``."""
        return torch.where(self.ranks(x.shape) < counts[..., None], values, x)

    def ordinary_logits(self, n, b):
        return self.normal((n, b, EXPERTS)) * self.choice((0.5, 1.0, 3.0), (n, 1, 1))

    def ordinary_bias(self, n):
        return self.normal((n, EXPERTS)) * self.choice((0.0, 1e-3, 0.05), (n, 1))


def _special_or_any(d, shape):
    """The edges of float32 half the time, any non-NaN pattern otherwise."""
    special = d.choice(SPECIAL_MAGNITUDES, shape, torch.int32) | (d.ints(0, 2, shape).to(torch.int32) << 31)
    return torch.where(d.ints(0, 2, shape) == 0, special.view(torch.float32), d.non_nan(shape))


def _tie_rows(d, n, b, group, winners):
    """Per row: ``winners`` clear winners, then ``group`` (bool [n, b, 256]) tied at one logit v and one bias
    beta, every other expert below (logit under v - 1, bias at most beta)."""
    v = d.uniform((n, b, 1), -8.0, 8.0)
    keys = torch.where(group, 2.0, torch.rand(group.shape, generator=d.g, device=d.device))
    ahead = inverse_permutation(keys.argsort(-1)) < winners[..., None]
    below = torch.empty(group.shape, device=d.device).exponential_(generator=d.g) * d.choice((0.5, 4.0), (n, 1, 1))
    logits = torch.where(group, v, v - 1 - below)
    logits = torch.where(ahead, v + 1 + d.uniform(group.shape, 0.0, 8.0), logits)
    beta = d.uniform((n, 1), -4.0, 4.0)
    bias = beta - (d.normal((n, EXPERTS)) * d.choice((1e-3, 0.05), (n, 1))).abs()
    return logits, torch.where((group | ahead).any(1), beta, bias)


def _expert_lane(d):
    return torch.arange(EXPERTS, device=d.device) // PER_LANE


def tie_within_lane(d, n, b):
    lane = d.ints(0, LANES, (n, b, 1))
    slots = d.ranks((n, b, PER_LANE)).repeat(1, 1, LANES) < d.ints(2, TOP_K + 1, (n, b, 1))
    return _tie_rows(d, n, b, (_expert_lane(d) == lane) & slots, d.ints(0, TOP_K, (n, b)))


def tie_across_lanes(d, n, b):
    lanes = (d.ranks((n, b, LANES)) < d.ints(2, TOP_K + 1, (n, b, 1))).repeat_interleave(PER_LANE, -1)
    slot = d.ints(0, PER_LANE, (n, b, LANES)).repeat_interleave(PER_LANE, -1)
    group = lanes & (torch.arange(EXPERTS, device=d.device) % PER_LANE == slot)
    return _tie_rows(d, n, b, group, d.ints(0, TOP_K, (n, b)))


def tie_at_eighth_place(d, n, b):
    group = d.ranks((n, b, EXPERTS)) < d.ints(2, TOP_K + 1, (n, b, 1))
    return _tie_rows(d, n, b, group, torch.full((n, b), TOP_K - 1, device=d.device))


def all_equal(d, n, b):
    return (_special_or_any(d, (n, b, 1)).expand(n, b, EXPERTS).contiguous(),
            _special_or_any(d, (n, 1)).expand(n, EXPERTS).contiguous())


def rounding_tie(d, n, b):
    """s saturated at 1 (kind 0), s absorbed by a bias >= 2^25 (1), or logits a few ulps apart whose s
    merge in the bias's ulp (2); the tied experts are the same in every row of a problem."""
    kind = d.ints(0, 3, (n, 1))
    size = torch.where(kind == 2, d.ints(3, TOP_K + 1, (n, 1)), d.ints(2, TOP_K + 1, (n, 1)))
    rank = d.ranks((n, EXPERTS))
    tied = rank < size
    beta = torch.where(kind == 0, d.uniform((n, 1), -4.0, 4.0),
                       torch.where(kind == 1, d.between((n, 1), 2.0**25, 2.0**60), d.between((n, 1), 16.0, 2.0**24 - 1)))
    bias = d.ordinary_bias(n)
    bias = torch.where(tied, beta, torch.where(kind == 0, torch.minimum(bias, beta), beta * 0.5))
    base = d.uniform((n, b, 1), 0.0, 2.0).view(torch.int32)
    steps = d.ranks((n, b, 16)).gather(-1, rank.clamp(max=15)[:, None, :].expand(n, b, EXPERTS))
    merged = (base + steps.to(torch.int32)).view(torch.float32) * d.choice((1.0, -1.0), (n, b, 1))
    values = torch.where((kind == 0)[..., None], d.between((n, b, EXPERTS), SATURATED_SCORE_INNER[0], FLT_MAX),
                         torch.where((kind == 1)[..., None], d.uniform((n, b, EXPERTS), -30.0, 30.0), merged))
    return torch.where(tied[:, None, :], values, d.ordinary_logits(n, b)), bias


def _subnormals(d, shape):
    return (d.ints(1, MAX_SUBNORMAL + 1, shape).to(torch.int32) | (d.ints(0, 2, shape).to(torch.int32) << 31)).view(torch.float32)


def subnormal_values(d, n, b):
    logits = d.plant(d.ordinary_logits(n, b), d.counts((n, b), DENSITIES), _subnormals(d, (n, b, EXPERTS)))
    return logits, d.plant(d.ordinary_bias(n), d.counts((n,), DENSITIES), _subnormals(d, (n, EXPERTS)))


def _zeros(d, x):
    """``x`` with some to all experts of a row at +0.0 or -0.0, and two more at +0.0 and -0.0."""
    signs = (d.ints(0, 2, x.shape).to(torch.int32) << 31).view(torch.float32)
    x = d.plant(x, d.counts(x.shape[:-1], ("some", "many", "most", "all")), signs)
    rank = d.ranks(x.shape)
    return torch.where(rank == 0, 0.0, torch.where(rank == 1, -0.0, x))


def signed_zeros(d, n, b):
    return _zeros(d, d.ordinary_logits(n, b)), _zeros(d, d.ordinary_bias(n))


def minus_inf_bias(d, n, b):
    count = torch.where(d.ints(0, 2, (n,)) == 0, d.choice(MINUS_INF_COUNTS, (n,), torch.int64),
                        d.ints(1, EXPERTS + 1, (n,)))
    return d.ordinary_logits(n, b), d.plant(d.ordinary_bias(n), count, -torch.inf)


def infinite_logits(d, n, b):
    infinities = d.choice((torch.inf, -torch.inf), (n, b, EXPERTS))
    return d.plant(d.ordinary_logits(n, b), d.counts((n, b), DENSITIES), infinities), d.ordinary_bias(n)


def _saturating(name, densities, inner, reach):
    """A family planting logits of one saturation range: uniform in ``inner``, anywhere in ``reach``."""
    def family(d, n, b):
        shape = (n, b, EXPERTS)
        values = torch.where(torch.rand(shape, generator=d.g, device=d.device) < REACH_SHARE,
                             d.between(shape, *reach), d.uniform(shape, *inner))
        return d.plant(d.ordinary_logits(n, b), d.counts((n, b), densities), values), d.ordinary_bias(n)
    family.__name__ = name
    return family


div_full_scaling = _saturating("div_full_scaling", ("most", "all"), DIV_FULL_SCALING_INNER, DIV_FULL_SCALING_REACH)
ex2_overflow = _saturating("ex2_overflow", ("most", "all"), EX2_OVERFLOW_INNER, (-FLT_MAX, EX2_OVERFLOW_EDGE))
saturated_score = _saturating("saturated_score", tuple(DENSITIES), SATURATED_SCORE_INNER, (SATURATED_SCORE_EDGE, FLT_MAX))


def bias_dominates(d, n, b):
    bias = torch.exp2(d.uniform((n, EXPERTS), 1.0, 40.0)) * d.choice((-1.0, 1.0), (n, EXPERTS))
    shared = d.between((n, TOP_K), 2.0, 2.0**40)
    group = d.ints(0, 2**20, (n, EXPERTS)) % d.ints(1, TOP_K + 1, (n, 1))
    take = torch.rand((n, EXPERTS), generator=d.g, device=d.device) < d.choice((0.0, 0.1, 0.5), (n, 1))
    return d.ordinary_logits(n, b), torch.where(take, shared.gather(1, group), bias)


def random_bits(d, n, b):
    return d.non_nan((n, b, EXPERTS)), d.non_nan((n, EXPERTS))


def _testfloat(d, shape):
    exponent = torch.where(torch.rand(shape, generator=d.g, device=d.device) < TESTFLOAT_RANDOM_SHARE,
                           d.ints(0, 255, shape), d.choice(TESTFLOAT_EXPONENTS, shape, torch.int64))
    significand = torch.where(torch.rand(shape, generator=d.g, device=d.device) < TESTFLOAT_RANDOM_SHARE,
                              d.ints(0, 1 << 23, shape), d.choice(TESTFLOAT_SIGNIFICANDS, shape, torch.int64))
    significand = torch.where(exponent == 255, 0, significand)  # an infinity, never a NaN
    bits = (d.ints(0, 2, shape) << 31) | (exponent << 23) | significand
    return _from_u32(bits)


def _from_u32(bits):
    """float32 of int64 values holding uint32 bit patterns."""
    return torch.where(bits >= 2**31, bits - 2**32, bits).to(torch.int32).view(torch.float32)


def testfloat_patterns(d, n, b):
    return _testfloat(d, (n, b, EXPERTS)), _testfloat(d, (n, EXPERTS))


def weight_overflow(d, n, b):
    shape = (n, b, EXPERTS)
    values = torch.where(torch.rand(shape, generator=d.g, device=d.device) < REACH_SHARE,
                         d.between(shape, -FLT_MAX, EX2_OVERFLOW_EDGE), d.uniform(shape, *EX2_OVERFLOW_INNER))
    logits = d.plant(d.uniform(shape, -80.0, -20.0), d.counts((n, b), ("one", "some")), values)
    return logits, d.ordinary_bias(n)


def shared_experts(d, n, b):
    winners = d.order((n, EXPERTS))[:, :TOP_K]  # the experts of ranks 0..7
    same = (d.ints(0, 2, (n, 1, 1)) == 0)
    shuffled = winners[:, None, :].expand(n, b, TOP_K).gather(-1, d.ranks((n, b, TOP_K)))
    order = torch.where(same, winners[:, None, :].expand(n, b, TOP_K), shuffled)
    values = d.uniform((n, b, TOP_K), 5.0, 9.0).sort(-1, descending=True).values
    logits = d.uniform((n, b, EXPERTS), -4.0, 3.0).scatter(-1, order, values)
    return logits, d.normal((n, EXPERTS)) * d.choice((0.0, 1e-3), (n, 1))


def plain(d, n, b):
    return d.ordinary_logits(n, b), d.ordinary_bias(n)


_BUILDERS = {f.__name__: f for f in (
    plain, tie_within_lane, tie_across_lanes, tie_at_eighth_place, all_equal, rounding_tie, subnormal_values,
    signed_zeros, minus_inf_bias, infinite_logits, div_full_scaling, ex2_overflow, saturated_score,
    bias_dominates, random_bits, testfloat_patterns, weight_overflow, shared_experts)}
FAMILIES = (PLAIN, *(name for name in GENERATORS if name in _BUILDERS))
# The families that draw exact ties where the top 8 is decided, in every problem: where a tie's winner shows.
TIE_FAMILIES = ("tie_within_lane", "tie_across_lanes", "tie_at_eighth_place", "all_equal", "rounding_tie")
NOT_IN_BULK = tuple(name for name in GENERATORS if name not in _BUILDERS)


def generate(family, generator, n, b, device):
    """(logits float32 [n, b, 256], bias float32 [n, 256]) of ``family`` drawn from ``generator``."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    logits, bias = _BUILDERS[family](_Draw(generator, torch.device(device)), n, b)
    return logits.to(torch.float32).contiguous(), bias.to(torch.float32).contiguous()
