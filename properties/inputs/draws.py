"""The parameters and values a routing case draws, as Hypothesis strategies: float32 bit patterns (any non-NaN,
subnormal, the edges of the format, a range), b, tile_n, local expert ranges, the metadata request, the scale."""

import numpy as np
from hypothesis import strategies as st

from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS
from properties.engine.floats import (
    FLT_MAX_BITS,
    MAX_SUBNORMAL,
    MIN_NORMAL,
    MIN_SUBNORMAL,
    PLUS_INF,
    SIGN,
    f32,
    f32_bits,
)

FLT_MAX = float(f32(FLT_MAX_BITS))
SPECIAL_TILES = (1, 2, 3, 4, 7, 8, 9, 16, 31, 32, 64, 127, 128, 255, 256)
# The edges of float32 by magnitude: zero, subnormal and normal extremes, one, the largest, infinity.
SPECIAL_MAGNITUDES = (0, MIN_SUBNORMAL, MAX_SUBNORMAL, MIN_NORMAL, int(f32_bits(1.0)), FLT_MAX_BITS, PLUS_INF)
# How many ranks a drawn expert-parallel split has.
RANK_SPLITS = (2, 4, 8, 16, 32)


def bound(x):
    """``x`` rounded to float32, as Hypothesis requires of width-32 bounds."""
    return float(np.float32(x))


def float_bits(low, high):
    """uint32 bit patterns of float32 values in [low, high] (Hypothesis favours the bounds)."""
    return st.floats(bound(low), bound(high), width=32).map(lambda x: int(f32_bits(x)))


def non_nan_bits():
    """Any float32 bit pattern but NaN: zeros, subnormals, normals, infinities of either sign."""
    return st.integers(0, 2**32 - 1).filter(lambda u: (u & ~SIGN) <= PLUS_INF)


def subnormal_bits():
    """A subnormal float32 of either sign."""
    return st.builds(lambda sign, m: sign | m, st.sampled_from([0, SIGN]), st.integers(MIN_SUBNORMAL, MAX_SUBNORMAL))


def special_bits():
    """Values at the edges of float32: zeros, subnormal and normal extremes, one, the largest, infinities."""
    return st.sampled_from([sign | m for m in SPECIAL_MAGNITUDES for sign in (0, SIGN)])


def any_value_bits():
    """The edges of float32 often, any non-NaN pattern otherwise."""
    return st.one_of(special_bits(), non_nan_bits())


def token_counts(min_value=1):
    """b, the number of token rows: min_value .. 8."""
    return st.integers(min_value, MAX_TOKENS)


def tiles():
    """tile_n: the powers of two and their neighbours, or anything in 1 .. 256."""
    return st.one_of(st.sampled_from(SPECIAL_TILES), st.integers(1, MAX_TILE))


@st.composite
def local_ranges(draw):
    """(local_expert_offset, num_local_experts): every expert, none, one, a prefix, a suffix, one rank of an
    even split into 2 .. 32 ranks, or any range."""
    kind = draw(st.sampled_from(["all", "none", "one", "prefix", "suffix", "rank", "any"]))
    if kind == "all":
        return 0, EXPERTS
    if kind == "none":
        return draw(st.integers(0, EXPERTS)), 0
    if kind == "one":
        return draw(st.integers(0, EXPERTS - 1)), 1
    if kind == "prefix":
        return 0, draw(st.integers(1, EXPERTS))
    if kind == "suffix":
        offset = draw(st.integers(0, EXPERTS - 1))
        return offset, EXPERTS - offset
    if kind == "rank":
        ranks = draw(st.sampled_from(RANK_SPLITS))
        width = EXPERTS // ranks
        return draw(st.integers(0, ranks - 1)) * width, width
    offset = draw(st.integers(0, EXPERTS))
    return offset, draw(st.integers(0, EXPERTS - offset))


@st.composite
def metadata_requests(draw, tile_strategy=None):
    """(tile_n, local_expert_offset, num_local_experts), or in about a quarter of draws (None, 0, 0) for a call
    without metadata."""
    if draw(st.integers(0, 3), label="metadata wanted") == 0:
        return None, 0, 0
    tile = draw(tiles() if tile_strategy is None else tile_strategy, label="tile_n")
    return (tile, *draw(local_ranges(), label="local range"))


SPECIAL_SCALES = (1.0, 2.5, 0.0, -0.0, -1.0, float(f32(MIN_SUBNORMAL)), float(f32(MAX_SUBNORMAL)), FLT_MAX)


def scales():
    """scale: 1, the routed scaling factor 2.5, zeros, subnormals, the largest float, a value like a routed
    scaling factor (0.5 .. 4), or any finite float32."""
    finite = st.floats(width=32, allow_nan=False, allow_infinity=False)
    return st.one_of(st.sampled_from(SPECIAL_SCALES), st.floats(0.5, 4.0, width=32), finite).map(np.float32)
