"""Correctly rounded float32 instructions that NumPy has no float32 form of: FFMA (fma.rn.f32) and the IEEE
division (div.rn.f32, SASS: MUFU.RCP, FFMA refinement, FCHK and a slow path), both through float64.

- div_rn_f32: the float64 quotient of two float32 values, rounded to float32, is the correctly rounded float32
  quotient (float64's 53 bits >= 2 * 24 + 2: double rounding is innocuous for division, Figueroa 1995).
- fma_rn_f32: the float64 product of two float32 values is exact (48 significant bits; exponents within
  float64's range); the sum with c is made exact as a float64 sum s and its error (TwoSum), rounded to odd
  in float64 (s, or its neighbour toward the error where s is inexact and even), then rounded to float32:
  rounding to odd with at least 2 more bits than the target leaves a single correct rounding (Boldo and
  Melquiond 2008). Subnormal operands and results are kept, as the H200's FFMA and division keep them.

Every NaN result is the pattern the H200 writes (primitives' canonical NaN). Arrays in, arrays out; the same
code runs on torch tensors (its float64 steps too: a compiler that contracts p = a*b into an FMA changes
nothing, the product being exact).
"""

import numpy as np

from oracles.numpy_model._xp import namespace
from oracles.numpy_model.primitives import _canonical_nan, _public


def _wide(x):
    """float32 ``x`` as float64 (exact)."""
    return x.astype(np.float64) if namespace(x) is np else x.to(namespace(x).float64)


def _narrow(x):
    """float64 ``x`` rounded to nearest even float32."""
    return x.astype(np.float32) if namespace(x) is np else x.to(namespace(x).float32)


def _fma_rn_f32(a, b, c):
    """FFMA (fma.rn.f32): a * b + c with one rounding to nearest even."""
    xp = namespace(a)
    p, c64 = _wide(a) * _wide(b), _wide(c)
    s = p + c64
    shifted = s - p
    error = (p - (s - shifted)) + (c64 - shifted)  # s + error == p + c exactly (TwoSum), s finite
    s_bits = s.view(xp.int64)
    # Round to odd: an inexact even s moves one unit of its magnitude toward the error's side.
    inexact_even = (error != 0) & ((s_bits & 1) == 0) & (xp.abs(s) < np.inf)
    step = xp.where((error > 0) == (s > 0), 1, -1)
    odd = xp.where(inexact_even, s_bits + step, s_bits).view(xp.float64)
    return _canonical_nan(_narrow(odd))


def _div_rn_f32(x, y):
    """div.rn.f32: x / y correctly rounded to nearest even."""
    return _canonical_nan(_narrow(_wide(x) / _wide(y)))


fma_rn_f32 = _public(_fma_rn_f32)
div_rn_f32 = _public(_div_rn_f32)
