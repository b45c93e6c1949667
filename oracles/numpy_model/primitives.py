"""Bitwise models of the H200's float32 instructions behind Triton 3.6.0's routing arithmetic.

FADD and FMUL are IEEE binary32 round-to-nearest-even with subnormals kept; NumPy float32 computes the same
value, and every NaN the H200 writes has the one canonical pattern measured with the tables. MUFU.EX2 and
MUFU.RCP are quadratic interpolators whose coefficients were derived from tables measured on the H200
(``oracles.mufu.interpolator``), wrapped in the SASS around them (``../shared/hardware-facts.md`` section 2).
Arrays in, arrays out; the same code runs on torch tensors.
"""

import functools

import numpy as np

from oracles.mufu import interpolator
from oracles.numpy_model._xp import (bits, floats, i32, i64, namespace, nowhere, require_f32, select, take,
                                    truncate_to_i32)

LOG2E = 0x3FB8AA3B  # float32 log2(e), Triton's constant in tl.sigmoid
ONE = 0x3F800000
_SIGN = -0x80000000
_ABS = 0x7FFFFFFF
_FRACTION = 0x007FFFFF
_INF_EXPONENT = 0xFF
_INF_BITS = _INF_EXPONENT << 23
_SMALLEST_NORMAL = 1 << 23
# The float32 bits of an interpolator's result are R + (base exponent << 23) (interpolator.RESULT_BASE);
# scaling it by 2^n adds n to that exponent.
_EX2_BASE_EXPONENT = interpolator.RESULT_BASE["ex2"] >> 23
_RCP_BASE_EXPONENT = interpolator.RESULT_BASE["rcp"] >> 23
_HALF = 0x3F000000
_EX2_CLAMP = 255.0
_TWO_TO_23 = 8388608.0
_EX2_HALVING_THRESHOLD = -126.0
_RANGE_HIGH = 2.0**126
_RANGE_LOW = 2.0**-126
_QUARTER = 0x3E800000
_TWO_TO_24 = 0x4B800000


_BLOCK = 1 << 16  # elements per pass over NumPy arrays: few enough Python calls per element, temporaries in cache


@functools.lru_cache(maxsize=None)
def _units_on(xp, device):
    """The interpolators' coefficients and squarer tables as int64 arrays of ``xp`` (on ``device`` for torch),
    and the canonical NaN bits."""
    units, nan = interpolator.load()
    if xp is not np:
        units = {name: {key: xp.from_numpy(v).to(device) if isinstance(v, np.ndarray) else v
                        for key, v in unit.items()} for name, unit in units.items()}
    return units, nan


def _units(x):
    return _units_on(namespace(x), getattr(x, "device", None))


def _interpolate(unit, f):
    """R = (C0 + C1*x + C2*sq(x)) >> RESULT_SHIFT for int32 fractions ``f`` (oracles.mufu.interpolator)."""
    f = i64(f)
    segment, x = f >> unit["x_bits"], f & ((1 << unit["x_bits"]) - 1)
    acc = take(unit["c0"], segment) + take(unit["c1"], segment) * x + take(unit["c2"], segment) * take(
        unit["square"], x)
    return truncate_to_i32(acc >> interpolator.RESULT_SHIFT)


def _f32(x, value_bits):
    """A float32 scalar of the given bits that broadcasts against ``x``."""
    return floats(i32(namespace(x), x, value_bits))


def _public(kernel, numpy_kernel=None):
    """The public form of ``kernel``: float32 arguments checked by name; NumPy ones broadcast together and
    run in cache-sized blocks with IEEE exceptions silenced (through ``numpy_kernel``, flat arrays in and
    out, where given); torch tensors passed through."""
    names = kernel.__code__.co_varnames[:kernel.__code__.co_argcount]

    @functools.wraps(kernel)
    def run(*args):
        if len(args) != len(names):
            raise TypeError(f"{kernel.__name__.lstrip('_')} takes {len(names)} argument(s) ({', '.join(names)}), "
                            f"got {len(args)}")
        args = [require_f32(name, a) for name, a in zip(names, args)]
        if len({namespace(a) for a in args}) != 1:
            raise ValueError(f"{', '.join(names)} must all be NumPy arrays or all torch tensors")
        if namespace(args[0]) is not np:
            return kernel(*args)
        shaped = np.broadcast_arrays(*args)
        with np.errstate(all="ignore"):
            if numpy_kernel is not None:
                return numpy_kernel(*(np.ascontiguousarray(a).reshape(-1) for a in shaped)).reshape(shaped[0].shape)
            if shaped[0].size <= _BLOCK:
                return np.asarray(kernel(*shaped), np.float32)
            flat = [np.ascontiguousarray(a).reshape(-1) for a in shaped]
            out = np.empty(flat[0].size, np.float32)
            for i in range(0, out.size, _BLOCK):
                out[i:i + _BLOCK] = kernel(*(a[i:i + _BLOCK] for a in flat))
        return out.reshape(shaped[0].shape)

    run.__name__ = run.__qualname__ = kernel.__name__.lstrip("_")
    return run


def _canonical_nan(r):
    """``r`` with every NaN replaced by the pattern the H200 writes."""
    return select(r != r, _f32(r, _units(r)[1]), r)


def _add_rn(a, b):
    """FADD (add.f32 / add.rn.f32): IEEE binary32 sum, round to nearest even."""
    return _canonical_nan(a + b)


def _mul_rn(a, b):
    """FMUL (mul.f32 / mul.rn.f32): IEEE binary32 product, round to nearest even."""
    return _canonical_nan(a * b)


def _ex2_approx_ftz_f32(t):
    """MUFU.EX2 (ex2.approx.ftz.f32): sign-magnitude fixed point n + f / 2^23; for t < 0 and f > 0,
    2^-(n + f / 2^23) is 2^-(n + 1) times the interpolator at the one's complement of f (f's 23 bits inverted)."""
    xp = namespace(t)
    (units, nan), b = _units(t), bits(t)
    sign = b >> 31  # 0 or -1
    # floor(|t| * 2^23): |t| clamped to 255 (every |t| >= 128 saturates), scaled exactly, truncated.
    fixed = truncate_to_i32(xp.clip(xp.abs(t), 0.0, _EX2_CLAMP) * _TWO_TO_23)
    f = fixed & _FRACTION
    complement = sign & ((-f) >> 31)  # -1 where t < 0 and f > 0, else 0
    e = _interpolate(units["ex2"], f ^ (complement & _FRACTION)) + (complement << 23)
    n = ((fixed >> 23) ^ sign) - sign + _EX2_BASE_EXPONENT  # the integer part, negative for t < 0, + base
    exponent = (e >> 23) + n
    result = e + (n << 23)
    result = select(exponent <= 0, 0, select(exponent >= _INF_EXPONENT, i32(xp, b, _INF_BITS), result))
    return floats(select((b & _ABS) > _INF_BITS, nan, result))


def _ex2_approx_f32(t):
    """ex2.approx.f32: below -126, MUFU.EX2 of t * 0.5 squared by an FMUL, so subnormal results survive."""
    low = t < _EX2_HALVING_THRESHOLD
    if nowhere(low):
        return _ex2_approx_ftz_f32(t)
    e = _ex2_approx_ftz_f32(namespace(t).where(low, _mul_rn(t, _f32(t, _HALF)), t))
    return namespace(t).where(low, _mul_rn(e, e), e)


def _rcp_approx_ftz_f32(y):
    """MUFU.RCP (rcp.approx.ftz.f32): the interpolated significand, exponent negated, results below 2^-126 flushed."""
    xp = namespace(y)
    (units, nan), b = _units(y), bits(y)
    magnitude = b & _ABS
    exponent = magnitude >> 23
    # The significand's bits scaled by 2^(127 - exponent); a result exponent <= 0 (y infinite too) leaves
    # bits below 2^23: flushed.
    result = _interpolate(units["rcp"], b & _FRACTION) + ((_RCP_BASE_EXPONENT + 127 - exponent) << 23)
    result = select(result < _SMALLEST_NORMAL, 0, result)
    result = select(exponent == 0, i32(xp, b, _INF_BITS), result) | (b & _SIGN)
    return floats(select(magnitude > _INF_BITS, nan, result))


def _div_full_f32(x, y):
    """div.full.f32: x and y scaled by 0.25 when |y| > 2^126, by 2^24 when |y| < 2^-126, then MUFU.RCP(y') * x'."""
    xp = namespace(y)
    magnitude = xp.abs(y)
    high, low = magnitude > _RANGE_HIGH, magnitude < _RANGE_LOW
    if nowhere(high) and nowhere(low):
        # k = 1: y * 1 and x * 1 change no bits but a NaN's, and the final product writes the canonical NaN.
        return _mul_rn(_rcp_approx_ftz_f32(y), x)
    k = floats(xp.where(high, _QUARTER, xp.where(low, i32(xp, y, _TWO_TO_24), ONE)))
    return _mul_rn(_rcp_approx_ftz_f32(_mul_rn(y, k)), _mul_rn(x, k))


def _sigmoid_f32(x):
    """Triton 3.6.0's tl.sigmoid: sub.f32 0 - x, mul.f32 by log2(e), ex2.approx.f32, add.f32 1.0, div.full.f32 1.0 / d."""
    one = _f32(x, ONE)
    t = _mul_rn(_add_rn(_f32(x, 0), -x), _f32(x, LOG2E))
    return _div_full_f32(one, _add_rn(_ex2_approx_f32(t), one))


# The common path of sigmoid on NumPy: t = x * -log2(e) in [-126, 126) (every |x| below about 87.3). There
# 0 - x is -x but at x = +0 (t = -0 then, whose MUFU.EX2 equals that of +0); ex2.approx.f32 is MUFU.EX2
# with neither a halved input nor a flushed or infinite result; d = 1 + 2^t lies in [1, 2^126], so
# div.full.f32 scales nothing and 1.0 * MUFU.RCP(d), a normal number, is MUFU.RCP(d) itself.
_COMMON_T_LOW = -126.0
_COMMON_T_HIGH = 126.0
_NEG_LOG2E = -float(np.int32(LOG2E).view(np.float32))


@functools.lru_cache(maxsize=None)
def _sigmoid_tables():
    """The interpolators' coefficients for the common path, result exponents folded into C0 (R's shift is
    exact on multiples of 2^RESULT_SHIFT). EX2 reads the interpolator at the one's complement of a negative
    t's fraction f as the two's complement fraction minus one: its row 0 holds R(0) for the index -1 of a
    negative t with f = 0 (C1 = C2 = 0), row s + 1 segment s. RCP adds 252 - (d's exponent) to R's."""
    (units, _), shift = interpolator.load(), interpolator.RESULT_SHIFT
    ex2, rcp = units["ex2"], units["rcp"]
    return {
        "ex2": {"c0": np.concatenate([ex2["c0"][:1], ex2["c0"]]) + (interpolator.RESULT_BASE["ex2"] << shift),
                "c1": np.concatenate([[0], ex2["c1"]]), "c2": np.concatenate([[0], ex2["c2"]]),
                "square": ex2["square"].astype(np.int16), "x_bits": ex2["x_bits"]},
        "rcp": {"c0": rcp["c0"] + ((interpolator.RESULT_BASE["rcp"] + (127 << 23)) << shift),
                "c1": rcp["c1"], "c2": rcp["c2"], "square": rcp["square"].astype(np.int16),
                "x_bits": rcp["x_bits"]},
    }


def _interpolate_into(unit, segment, x, work, out):
    """``out`` (int32) = (C0 + C1*x + C2*sq(x)) >> RESULT_SHIFT of ``unit``'s common-path tables, using the
    int64 buffers ``work[0]``, ``work[1]`` and the int16 ``work[2]``; ``segment`` and ``x`` are int64 (the
    gathers' index type, converted once)."""
    acc, term, square = work
    np.take(unit["c1"], segment, mode="clip", out=acc)
    np.multiply(acc, x, out=acc)
    np.take(unit["square"], x, mode="clip", out=square)
    np.take(unit["c2"], segment, mode="clip", out=term)
    np.multiply(term, square, out=term)
    np.add(acc, term, out=acc)
    np.take(unit["c0"], segment, mode="clip", out=term)
    np.add(acc, term, out=acc)
    np.right_shift(acc, interpolator.RESULT_SHIFT, out=acc)
    np.copyto(out, acc, casting="unsafe")


def _sigmoid_numpy(x):
    """sigmoid_f32 of a flat NumPy array: the common path in blocks with reused buffers; the elements of a
    block outside it through ``_sigmoid_f32``."""
    tables, out, n = _sigmoid_tables(), np.empty_like(x), min(x.size, _BLOCK)
    t = np.empty(n, np.float32)
    s, frac, high, index = (np.empty(n, np.int32) for _ in range(4))
    segment, x_part = np.empty(n, np.int64), np.empty(n, np.int64)
    work = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int16)
    ex2, rcp = tables["ex2"], tables["rcp"]
    for i in range(0, x.size, _BLOCK):
        xb, ob = x[i:i + _BLOCK], out[i:i + _BLOCK]
        m = xb.size
        tb, sb, fb, hb, ib, gb, xb64 = t[:m], s[:m], frac[:m], high[:m], index[:m], segment[:m], x_part[:m]
        wb = tuple(w[:m] for w in work)
        np.multiply(xb, np.float32(_NEG_LOG2E), out=tb)
        rare = None
        if not (tb.min() >= _COMMON_T_LOW and tb.max() < _COMMON_T_HIGH):  # False for a NaN too
            rare = np.flatnonzero(~((tb >= _COMMON_T_LOW) & (tb < _COMMON_T_HIGH)))
        # MUFU.EX2: s = t * 2^23 truncated; bits R(index) + (floor(s / 2^23) << 23) + base.
        np.multiply(tb, np.float32(_TWO_TO_23), out=tb)
        np.copyto(sb, tb, casting="unsafe")
        np.bitwise_and(sb, _FRACTION, out=fb)
        np.subtract(sb, fb, out=hb)
        np.right_shift(sb, 31, out=ib)
        np.add(fb, ib, out=ib)  # f for t >= 0; for t < 0, 2^23 - f' - 1 (f' the fraction of |t|), or -1
        np.bitwise_and(ib, (1 << ex2["x_bits"]) - 1, out=xb64)
        np.right_shift(ib, ex2["x_bits"], out=ib)
        np.add(ib, 1, out=gb)
        _interpolate_into(ex2, gb, xb64, wb, sb)
        np.add(sb, hb, out=sb)
        d = sb.view(np.float32)
        np.add(d, np.float32(1.0), out=d)
        # MUFU.RCP of d >= 1: bits R(fraction) + ((252 - exponent) << 23), 252 folded into C0.
        np.bitwise_and(sb, _FRACTION, out=fb)
        np.subtract(fb, sb, out=hb)
        np.right_shift(fb, rcp["x_bits"], out=gb)
        np.bitwise_and(fb, (1 << rcp["x_bits"]) - 1, out=xb64)
        _interpolate_into(rcp, gb, xb64, wb, sb)
        np.add(sb, hb, out=ob.view(np.int32))
        if rare is not None and rare.size:
            ob[rare] = _sigmoid_f32(xb[rare])
    return out


add_rn = _public(_add_rn)
mul_rn = _public(_mul_rn)
ex2_approx_ftz_f32 = _public(_ex2_approx_ftz_f32)
ex2_approx_f32 = _public(_ex2_approx_f32)
rcp_approx_ftz_f32 = _public(_rcp_approx_ftz_f32)
div_full_f32 = _public(_div_full_f32)
sigmoid_f32 = _public(_sigmoid_f32, _sigmoid_numpy)
