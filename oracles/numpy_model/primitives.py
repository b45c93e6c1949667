"""Bitwise models of the H200's float32 instructions behind Triton 3.6.0's routing arithmetic.

FADD and FMUL are IEEE binary32 round-to-nearest-even with subnormals kept; NumPy float32 computes the same
value, and every NaN the H200 writes has the one canonical pattern measured with the tables. MUFU.EX2 and
MUFU.RCP are modelled by tables measured on the H200 (``oracles.mufu``) and the SASS around them
(``../shared/hardware-facts.md`` section 2). Arrays in, arrays out; the same code runs on torch tensors.
"""

import functools

import numpy as np

from oracles.mufu import tables as mufu_tables
from oracles.numpy_model._xp import bits, floats, i32, namespace, require_f32

LOG2E = 0x3FB8AA3B  # float32 log2(e), Triton's constant in tl.sigmoid
ONE = 0x3F800000
_SIGN = -0x80000000
_ABS = 0x7FFFFFFF
_FRACTION = 0x007FFFFF
_TABLE_SIZE = _FRACTION + 1
_INF_EXPONENT = 0xFF
_INF_BITS = _INF_EXPONENT << 23
_HALF = 0x3F000000
_EX2_INPUT_LIMIT_EXPONENT = 127 + 7  # |t| >= 128: beyond every table entry
_EX2_HALVING_THRESHOLD = -126.0
_RANGE_HIGH = 2.0**126
_RANGE_LOW = 2.0**-126
_QUARTER = 0x3E800000
_TWO_TO_24 = 0x4B800000


_BLOCK = 1 << 14  # elements per pass over NumPy arrays, so the temporaries stay in the core's cache


@functools.lru_cache(maxsize=None)
def _tables_on(xp, device):
    """The measured tables as int32 arrays of library ``xp`` (on ``device`` for torch).

    "ex2" holds the t >= 0 table followed by the t < 0 one, so one gather serves both signs.
    """
    tables, specials = mufu_tables.load()
    joined = {"ex2": np.concatenate([tables["ex2_pos"], tables["ex2_neg"]]).view(np.int32),
              "rcp": tables["rcp"].view(np.int32)}
    if xp is not np:
        joined = {name: xp.from_numpy(t).to(device) for name, t in joined.items()}
    return joined, specials


def _tables(x):
    xp = namespace(x)
    return _tables_on(xp, getattr(x, "device", None))


def _blocked(fn):
    """Run ``fn`` on NumPy arguments (broadcast together) in cache-sized blocks; torch tensors pass through."""

    @functools.wraps(fn)
    def run(*args):
        if not all(isinstance(a, (np.ndarray, np.generic)) for a in args):
            return fn(*args)
        args = [require_f32(name, a) for name, a in zip(fn.__code__.co_varnames, args)]
        shaped = np.broadcast_arrays(*args)
        if shaped[0].size <= _BLOCK:
            return fn(*shaped)
        flat = [np.ascontiguousarray(a).reshape(-1) for a in shaped]
        out = np.empty(flat[0].size, np.float32)
        for i in range(0, out.size, _BLOCK):
            out[i:i + _BLOCK] = fn(*(a[i:i + _BLOCK] for a in flat))
        return out.reshape(shaped[0].shape)

    return run


def _canonical_nan(r):
    """``r`` with every NaN replaced by the pattern the H200 writes."""
    xp = namespace(r)
    is_nan = r != r
    if xp is np and not is_nan.any():
        return r
    return xp.where(is_nan, floats(i32(xp, r, _tables(r)[1]["nan"])), r)


@_blocked
def add_rn(a, b):
    """FADD (add.f32 / add.rn.f32): IEEE binary32 sum, round to nearest even."""
    a, b = require_f32("a", a), require_f32("b", b)
    with np.errstate(over="ignore", invalid="ignore"):
        return _canonical_nan(a + b)


@_blocked
def mul_rn(a, b):
    """FMUL (mul.f32 / mul.rn.f32): IEEE binary32 product, round to nearest even."""
    a, b = require_f32("a", a), require_f32("b", b)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return _canonical_nan(a * b)


@_blocked
def ex2_approx_ftz_f32(t):
    """MUFU.EX2 (ex2.approx.ftz.f32): sign-magnitude fixed point, one measured table per sign."""
    t = require_f32("t", t)
    xp = namespace(t)
    (table, specials), b = _tables(t), bits(t)
    magnitude, sign = b & _ABS, b >> 31  # sign: 0 or -1
    exponent = magnitude >> 23
    significand = (magnitude & _FRACTION) | (_FRACTION + 1)
    # floor(|t| * 2^23) for |t| < 128: the integer part n and 23 fraction bits f, truncated.
    shift = exponent - 127
    fixed = xp.where(shift >= 0, significand << xp.clip(shift, 0, 6), significand >> xp.clip(-shift, 0, 31))
    e = table["ex2"][(fixed & _FRACTION) | (sign & _TABLE_SIZE)]
    n = ((fixed >> 23) ^ sign) - sign  # the integer part, negative for t < 0
    result_exponent = (e >> 23) + n
    result = xp.where(result_exponent > 0, e + (n << 23), 0)  # below 2^-126: +0
    in_range = exponent < _EX2_INPUT_LIMIT_EXPONENT
    result = xp.where(in_range, result, xp.where(sign < 0, 0, i32(xp, b, _INF_BITS)))
    return floats(xp.where(magnitude > _INF_BITS, specials["nan"], result))


@_blocked
def ex2_approx_f32(t):
    """ex2.approx.f32: below -126, MUFU.EX2 of t * 0.5 squared by an FMUL, so subnormal results survive."""
    t = require_f32("t", t)
    xp = namespace(t)
    low = t < _EX2_HALVING_THRESHOLD
    e = ex2_approx_ftz_f32(xp.where(low, mul_rn(t, floats(i32(xp, t, _HALF))), t))
    return xp.where(low, mul_rn(e, e), e)


@_blocked
def rcp_approx_ftz_f32(y):
    """MUFU.RCP (rcp.approx.ftz.f32): measured significand table, exponent negated, results below 2^-126 flushed."""
    y = require_f32("y", y)
    xp = namespace(y)
    (table, specials), b = _tables(y), bits(y)
    sign, magnitude = b & _SIGN, b & _ABS
    exponent = magnitude >> 23
    r = table["rcp"][magnitude & _FRACTION]
    result_exponent = (r >> 23) - (exponent - 127)
    normal = xp.where(result_exponent > 0, (r & _FRACTION) | (result_exponent << 23), 0)
    result = xp.where(exponent == 0, _INF_BITS, xp.where(exponent == _INF_EXPONENT, 0, normal))
    return floats(xp.where(magnitude > _INF_BITS, specials["nan"], result | sign))


@_blocked
def div_full_f32(x, y):
    """div.full.f32: x and y scaled by 0.25 when |y| > 2^126, by 2^24 when |y| < 2^-126, then MUFU.RCP(y') * x'."""
    x, y = require_f32("x", x), require_f32("y", y)
    xp = namespace(y)
    magnitude = xp.abs(y)
    k = floats(xp.where(magnitude > _RANGE_HIGH, _QUARTER,
                        xp.where(magnitude < _RANGE_LOW, i32(xp, y, _TWO_TO_24), ONE)))
    return mul_rn(rcp_approx_ftz_f32(mul_rn(y, k)), mul_rn(x, k))


@_blocked
def sigmoid_f32(x):
    """Triton 3.6.0's tl.sigmoid: sub.f32 0 - x, mul.f32 by log2(e), ex2.approx.f32, add.f32 1.0, div.full.f32 1.0 / d."""
    x = require_f32("x", x)
    xp = namespace(x)
    zero, one = floats(i32(xp, x, 0)), floats(i32(xp, x, ONE))
    t = mul_rn(add_rn(zero, -x), floats(i32(xp, x, LOG2E)))
    return div_full_f32(one, add_rn(ex2_approx_f32(t), one))
