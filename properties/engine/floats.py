"""float32 bit patterns: conversions, the named patterns at the edges of the format, and random non-NaN bits."""

import numpy as np

SIGN = 0x80000000
MIN_SUBNORMAL, MAX_SUBNORMAL, MIN_NORMAL = 0x00000001, 0x007FFFFF, 0x00800000
FLT_MAX_BITS = 0x7F7FFFFF
PLUS_INF, MINUS_INF = 0x7F800000, 0xFF800000


def f32(bits):
    """float32 array (or scalar) with the given uint32 bit patterns."""
    return np.asarray(bits, np.uint64).astype(np.uint32).view(np.float32)


def f32_bits(x):
    """uint32 bit patterns of float32 ``x``."""
    return np.asarray(x, np.float32).view(np.uint32)


def ulp_distance(a, b):
    """int64 array: how many float32 values lie between ``a`` and ``b`` elementwise, counted through zero
    (-0.0 and +0.0 are 0 apart; no NaN allowed)."""
    def ordered(x):
        bits = np.asarray(x, np.float32).view(np.int32).astype(np.int64)
        return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)
    return np.abs(ordered(a) - ordered(b))


def random_non_nan(rng, shape):
    """float32 of uniformly random bit patterns from NumPy generator ``rng``, each NaN redrawn."""
    bits = rng.integers(0, 2**32, shape, dtype=np.uint64).astype(np.uint32)
    nan = (bits & ~np.uint32(SIGN)) > PLUS_INF
    while nan.any():
        bits[nan] = rng.integers(0, 2**32, int(nan.sum()), dtype=np.uint64).astype(np.uint32)
        nan = (bits & ~np.uint32(SIGN)) > PLUS_INF
    return f32(bits)
