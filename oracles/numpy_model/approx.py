"""Bitwise models of the H200's other approximate PTX instructions, beside those of the routing kernel
(oracles.numpy_model.primitives): rcp.approx.f32, rsqrt.approx[.ftz].f32, sqrt.approx[.ftz].f32,
lg2.approx[.ftz].f32, sin.approx[.ftz].f32, cos.approx[.ftz].f32, tanh.approx.f32, ex2.approx.f16,
ex2.approx.ftz.bf16, tanh.approx.f16 and tanh.approx.bf16.

MUFU.RSQ, MUFU.SQRT, MUFU.LG2, MUFU.SIN/COS and MUFU.TANH are quadratic interpolators fitted from the survey
(oracles.mufu.segments); the f16 and bf16 forms of ex2 and tanh are MUFU.EX2 (the routing model's own) and
MUFU.TANH rounded toward zero. The SASS around each unit, read from ptxas (Triton 3.6.0, sm_90a), is in
oracles/mufu/data/sass-sequences.json. `python -m oracles.mufu prove` sweeps each over every input against the
GPU (exhaustive-proof.json, "approximate_ops"); oracles.mufu.recheck.approx_trust says which the committed record
proves. Arrays in, arrays out; the same code runs on torch tensors.
"""

import functools

import numpy as np

from oracles.mufu import segments
from oracles.numpy_model._xp import bits, floats, i32, i64, namespace, nowhere, select, take, truncate_to_i32
from oracles.numpy_model.primitives import (_ABS, _FRACTION, _INF_BITS, _INF_EXPONENT, _QUARTER, _RANGE_HIGH,
                                            _RANGE_LOW, _SIGN, _TWO_TO_24, ONE, _ex2_approx_ftz_f32, _f32,
                                            _add_rn, _mul_rn, _public, _rcp_approx_ftz_f32, _units)

_SMALLEST_NORMAL = 1 << 23
_TWO_TO_12 = 0x45800000
_TWO_TO_MINUS_12 = 0x39800000
_MINUS_24 = 0xC1C00000 - (1 << 32)
_TWO_TO_25 = 0x4C000000
_TWO_TO_32 = 0x4F800000
_MINUS_INF = 0xFF800000 - (1 << 32)
_F16_INF = 0x7C00
_HALF_NAN = 0x7FFF  # what MUFU.EX2.F16, MUFU.TANH.F16 and their .BF16 forms write for a NaN
_F16_SIGN = 0x8000


@functools.lru_cache(maxsize=None)
def _segment_units_on(xp, device):
    """The survey-fitted units (oracles.mufu.segments) as int64 arrays of ``xp`` (on ``device`` for torch)."""
    units = segments.load()
    if xp is not np:
        units = {name: {key: xp.from_numpy(v).to(device) if isinstance(v, np.ndarray) else v
                        for key, v in unit.items()} for name, unit in units.items()}
    return units


def _segmented(name, index):
    """int64 R of the survey-fitted unit ``name`` at int32 indices: (C0 + C1*x + C2*sq(x)) >> shift."""
    unit = _segment_units_on(namespace(index), getattr(index, "device", None))[name]
    i = i64(index)
    segment, x = i >> unit["x_bits"], i & ((1 << unit["x_bits"]) - 1)
    acc = take(unit["c0"], segment) + take(unit["c1"], segment) * x + take(unit["c2"], segment) * take(
        unit["square"], x)
    return acc >> unit["result_shift"]


@functools.lru_cache(maxsize=None)
def _every_output(kernel):
    """uint16 [2^16]: ``kernel`` (a 16-bit model) at every input, computed once, so NumPy calls are one gather."""
    with np.errstate(all="ignore"):
        return kernel(np.arange(1 << 16, dtype=np.uint16))


def _public16(kernel):
    """The public form of a 16-bit kernel: bit patterns in and out, uint16 NumPy arrays or int16 tensors."""

    @functools.wraps(kernel)
    def run(h):
        xp = namespace(h)
        want = np.uint16 if xp is np else xp.int16
        if h.dtype != want:
            raise ValueError(f"h must be {'uint16' if xp is np else 'int16'} bit patterns, got {h.dtype}")
        if xp is not np:
            return kernel(h)
        return np.take(_every_output(kernel), h.astype(np.intp), mode="clip")

    run.__name__ = run.__qualname__ = kernel.__name__.lstrip("_")
    return run


def _rcp_approx_f32(y):
    """rcp.approx.f32: k * MUFU.RCP(y * k), k = 0.25 where |y| > 2^126, 2^24 where |y| < 2^-126, else 1."""
    xp = namespace(y)
    magnitude = xp.abs(y)
    high, low = magnitude > _RANGE_HIGH, magnitude < _RANGE_LOW
    if nowhere(high) and nowhere(low):
        return _rcp_approx_ftz_f32(y)
    k = floats(xp.where(high, _QUARTER, xp.where(low, i32(xp, y, _TWO_TO_24), ONE)))
    return _mul_rn(k, _rcp_approx_ftz_f32(_mul_rn(y, k)))


def _root(x, unit, direction):
    """MUFU.RSQ (direction -1) or MUFU.SQRT (+1) of a positive normal x: the unit's R at (exponent parity,
    fraction), its exponent moved by direction * (exponent - 127 - parity) / 2."""
    b = bits(x)
    exponent = (b >> 23) & _INF_EXPONENT
    parity = (exponent + 1) & 1
    index = (parity << 23) | (b & _FRACTION)
    r = truncate_to_i32(_segmented(unit, index))
    exact = segments.UNITS[unit]["exact_at_zero"]
    if exact is not None:
        r = select(index == 0, i32(namespace(x), b, exact), r)
    return r + segments.UNITS[unit]["result_base"] + direction * (((exponent - 127 - parity) >> 1) << 23)


def _all_positive_normal(x):
    """True for a NumPy block of positive normal floats only (the common case, no special input to handle);
    False for torch, so the GPU runs every branch."""
    if namespace(x) is not np or x.size == 0:
        return False
    b = bits(x)
    return bool(b.min() >= _SMALLEST_NORMAL and b.max() < _INF_BITS)


def _rsqrt_approx_ftz_f32(x):
    """MUFU.RSQ (rsqrt.approx.ftz.f32): +-0 and subnormals give +-inf, +inf gives +0, negatives and NaN NaN."""
    xp = namespace(x)
    if _all_positive_normal(x):
        return floats(_root(x, "rsq", -1))
    b, nan = bits(x), _units(x)[1]
    exponent = (b >> 23) & _INF_EXPONENT
    result = _root(x, "rsq", -1)
    result = select(exponent == 0, (b & _SIGN) | i32(xp, b, _INF_BITS), select(b == _INF_BITS, 0, result))
    return floats(select(((b < 0) & (exponent != 0)) | ((b & _ABS) > _INF_BITS), nan, result))


def _sqrt_approx_ftz_f32(x):
    """MUFU.SQRT (sqrt.approx.ftz.f32): +-0 and subnormals give +-0, +inf +inf, negatives and NaN NaN."""
    if _all_positive_normal(x):
        return floats(_root(x, "sqrt", 1))
    b, nan = bits(x), _units(x)[1]
    exponent = (b >> 23) & _INF_EXPONENT
    result = _root(x, "sqrt", 1)
    result = select(exponent == 0, b & _SIGN, select(b == _INF_BITS, b, result))
    return floats(select(((b < 0) & (exponent != 0)) | ((b & _ABS) > _INF_BITS), nan, result))


def _scaled_below_normal(x, unit_fn, correct, constant):
    """The non-.ftz wrapper of rsqrt, sqrt and lg2: where |x| < 2^-126 (zeros too), x * 2^24 into the unit and
    the result corrected by ``correct`` (one FMUL or FADD) with float32 bits ``constant``; elsewhere the unit
    alone."""
    xp = namespace(x)
    low = xp.abs(x) < _RANGE_LOW
    if nowhere(low):
        return unit_fn(x)
    r = unit_fn(xp.where(low, _mul_rn(x, _f32(x, _TWO_TO_24)), x))
    return xp.where(low, correct(r, _f32(x, constant)), r)


def _rsqrt_approx_f32(x):
    """rsqrt.approx.f32: below 2^-126 in magnitude (zeros too), MUFU.RSQ(x * 2^24) * 2^12."""
    return _scaled_below_normal(x, _rsqrt_approx_ftz_f32, _mul_rn, _TWO_TO_12)


def _sqrt_approx_f32(x):
    """sqrt.approx.f32: below 2^-126 in magnitude (zeros too), MUFU.SQRT(x * 2^24) * 2^-12."""
    return _scaled_below_normal(x, _sqrt_approx_ftz_f32, _mul_rn, _TWO_TO_MINUS_12)


def _ex2_approx_f16(h):
    """ex2.approx.f16 (MUFU.EX2.F16): MUFU.EX2 of the exact float32 of h, rounded toward zero to f16
    (subnormal results kept), results of 2^16 and above +inf, a NaN the canonical 0x7FFF."""
    xp = namespace(h)
    b = bits(_ex2_approx_ftz_f32(_f16_to_f32(h)))  # >= +0, +inf or NaN
    return _to16(xp.where((b & _ABS) > _INF_BITS, i32(xp, b, _HALF_NAN), _toward_zero_f16(b)))


def _f16_to_f32(h):
    """The float32 (exact) of f16 bit patterns ``h``."""
    xp = namespace(h)
    return h.view(np.float16).astype(np.float32) if xp is np else h.view(xp.float16).to(xp.float32)


def _toward_zero_f16(b):
    """int32 f16 bits of float32 bit patterns ``b`` >= 0 (no NaN), rounded toward zero: f16 subnormals kept,
    2^16 and above +inf."""
    xp = namespace(b)
    normal = (b - ((127 - 15) << 23)) >> 13  # f16 exponent and the top 10 fraction bits
    subnormal = truncate_to_i32(floats(b) * _f32(b, _TWO_TO_24))  # in units of 2^-24, truncated
    r = xp.where(b < (113 << 23), subnormal, normal)  # below 2^-14: f16 subnormal
    return xp.where(b >= (143 << 23), i32(xp, b, _F16_INF), r)


def _ex2_approx_ftz_bf16(h):
    """ex2.approx.ftz.bf16 (MUFU.EX2.BF16): MUFU.EX2 of the float32 of h, truncated to its top 16 bits."""
    x = floats((_from16(h) << 16))
    return _to16(bits(_ex2_approx_ftz_f32(x)) >> 16)


def _from16(h):
    """int32 of 16-bit patterns (uint16 NumPy, int16 torch), zero-extended."""
    xp = namespace(h)
    return h.astype(np.int32) if xp is np else h.to(xp.int32) & 0xFFFF


def _to16(r):
    """16-bit patterns of int32 ``r`` in the public dtype: uint16 (NumPy) or int16 (torch)."""
    xp = namespace(r)
    return (r & 0xFFFF).astype(np.uint16) if xp is np else r.to(xp.int16)


def _toward_zero_f32(n):
    """float32 of int64 ``n`` >= 0 (below 2^53), rounded toward zero: the nearest float, one step down where
    that rounded up."""
    if namespace(n) is np:
        r = n.astype(np.float32)
        return floats(bits(r) - (r.astype(np.int64) > n).astype(np.int32))
    r = n.to(namespace(n).float32)
    return floats(bits(r) - (r.to(namespace(n).int64) > n).to(namespace(n).int32))


def _lg2_of_normal(b):
    """MUFU.LG2's bits for positive normal bit patterns ``b`` other than 1.0: V = log2(m) in fixed point
    (2^-36) from the fitted interpolator; for x = m 2^e, e >= 0: e + V toward zero; e < 0: minus
    (-e * 2^36 - V - 1) toward zero (the one's complement of e * 2^36 + V)."""
    xp = namespace(b)
    e = i64(b >> 23) - 127
    v = _segmented("lg2", b & _FRACTION)
    fraction_bits = segments.UNITS["lg2"]["fraction_bits"]
    negative = e < 0
    magnitude = xp.where(negative, ((-e) << fraction_bits) - v - 1, (e << fraction_bits) + v)
    scaled = bits(_toward_zero_f32(magnitude)) - (fraction_bits << 23)  # exact: every result is normal
    return scaled | (truncate_to_i32(e) & _SIGN)


def _lg2_approx_ftz_f32(x):
    """MUFU.LG2 (lg2.approx.ftz.f32): ``_lg2_of_normal``; x = 1 gives +0, +-0 and subnormals -inf, +inf +inf,
    negatives and NaN NaN."""
    xp = namespace(x)
    b, nan = bits(x), _units(x)[1]
    if _all_positive_normal(x):
        return floats(select(b == ONE, 0, _lg2_of_normal(b)))
    exponent = (b >> 23) & _INF_EXPONENT
    result = select(b == ONE, 0, _lg2_of_normal(b & _ABS))
    result = select(exponent == 0, i32(xp, b, _MINUS_INF), select(b == _INF_BITS, b, result))
    return floats(select(((b < 0) & (exponent != 0)) | ((b & _ABS) > _INF_BITS), nan, result))


def _lg2_approx_f32(x):
    """lg2.approx.f32: below 2^-126 in magnitude (zeros too), MUFU.LG2(x * 2^24) - 24 (an FMUL, an FADD)."""
    return _scaled_below_normal(x, _lg2_approx_ftz_f32, _add_rn, _MINUS_24)


def _fmul_rz(x, c_bits):
    """FMUL.RZ of float32 x by the float32 of ``c_bits``: the exact product (float64), toward zero to float32."""
    xp = namespace(x)
    c = float(np.uint32(c_bits).view(np.float32))
    if xp is np:
        p = x.astype(np.float64) * c
        r = p.astype(np.float32)
        return floats(bits(r) - (np.abs(r.astype(np.float64)) > np.abs(p)).astype(np.int32))
    p = x.to(xp.float64) * c
    r = p.to(xp.float32)
    return floats(bits(r) - (xp.abs(r.to(xp.float64)) > xp.abs(p)).to(xp.int32))


def _mufu_sin(t, sign, quarter_offset):
    """MUFU.SIN (quarter_offset 0) or MUFU.COS (a quarter turn, 2^23) of t turns, given |t| and the sign bit to
    apply (t's for sin, none for cos): the phase floor(|t| 2^25) mod 2^25 (oracles.mufu.segments), S(f) or S(~f)
    by quarter, negated in the second half; infinities and NaN give NaN."""
    xp = namespace(t)
    spec, nan = segments.UNITS["sin"], _units(t)[1]
    b = bits(t)
    scaled = xp.minimum(t, _f32(t, _TWO_TO_32)) * _f32(t, _TWO_TO_25)  # exact; from 2^25 turns on, phase 0
    phase = (_floor_i64(scaled) + quarter_offset) & ((1 << spec["phase_bits"]) - 1)
    mask = (1 << spec["index_bits"]) - 1
    quarter, f = truncate_to_i32(phase >> spec["index_bits"]), truncate_to_i32(phase & mask)
    index = f ^ ((quarter & 1) * mask)  # S(~f) in quarters 1 and 3
    r = _sine(index) | (((quarter >> 1) << 31) ^ sign)
    return floats(select(b >= _INF_BITS, nan, r))


def _sine(index):
    """float32 bits of S at 23-bit indices: V (2^-37) toward zero. On NumPy one gather from S at every index,
    computed once from the coefficients (32 MB); on torch the interpolator itself."""
    if namespace(index) is np:
        return np.take(_every_sine(), index, mode="clip")
    return _sine_of(index)


def _sine_of(index):
    v = _segmented("sin", index)
    r = bits(_toward_zero_f32(v)) - (segments.UNITS["sin"]["fraction_bits"] << 23)  # exact: V >= 1 is normal
    return namespace(index).where(v == 0, i32(namespace(index), index, 0), r)


@functools.lru_cache(maxsize=1)
def _every_sine():
    index = np.arange(1 << segments.UNITS["sin"]["index_bits"], dtype=np.int32)
    return np.concatenate([_sine_of(index[i:i + (1 << 20)]) for i in range(0, index.size, 1 << 20)])


def _floor_i64(x):
    """int64 of float32 x >= 0 below 2^62, toward zero."""
    return x.astype(np.int64) if namespace(x) is np else x.to(namespace(x).int64)


def _sin_approx_f32(x):
    """sin.approx.f32 and sin.approx.ftz.f32 (one SASS): MUFU.SIN of FMUL.RZ(x, 1 / (2 pi)); the product's
    sign is x's, so its magnitude is FMUL.RZ(|x|, 1 / (2 pi)); odd: x's sign applied."""
    magnitude = floats(bits(x) & _ABS)
    return _mufu_sin(_fmul_rz(magnitude, segments.INV_2PI_BITS), bits(x) & _SIGN, 0)


def _cos_approx_f32(x):
    """cos.approx.f32 and cos.approx.ftz.f32 (one SASS): MUFU.COS of FMUL.RZ(x, 1 / (2 pi)); even."""
    magnitude = floats(bits(x) & _ABS)
    return _mufu_sin(_fmul_rz(magnitude, segments.INV_2PI_BITS), 0, 1 << segments.UNITS["sin"]["index_bits"])


def _tanh_approx_f32(x):
    """tanh.approx.f32 (MUFU.TANH): in the modelled binades R at the quantised |x| (oracles.mufu.segments),
    below them x itself (subnormals and zeros too), from 8 on 1.0 (infinities too); odd; NaN gives NaN."""
    xp = namespace(x)
    unit = _segment_units_on(xp, getattr(x, "device", None))["tanh"]
    b = bits(x)
    a = b & _ABS
    exponent = a >> 23
    index = (a >> take(unit["index_shift"], exponent)) - take(unit["index_offset"], exponent)
    low = unit["first_exponent"] << 23
    high = (unit["first_exponent"] + len(unit["quantum_bits"])) << 23
    r = xp.where(a < low, a, xp.where(a >= high, i32(xp, b, ONE), _tanh_at(index)))
    return floats(select(a > _INF_BITS, _units(x)[1], r | (b & _SIGN)))


def _tanh_at(index):
    """float32 bits of MUFU.TANH at its indices. On NumPy one gather from every index's output, computed once
    from the coefficients (27 MB); on torch the interpolator itself."""
    if namespace(index) is np:
        return np.take(_every_tanh(), index, mode="clip")
    return _tanh_of(index)


def _tanh_of(index):
    """R (oracles.mufu.segments) toward zero to float32, scaled by its units: exact, every result is normal."""
    unit = _segment_units_on(namespace(index), getattr(index, "device", None))["tanh"]
    fraction_bits = truncate_to_i32(take(unit["result_fraction_bits"], index >> unit["x_bits"]))
    return bits(_toward_zero_f32(_segmented("tanh", index))) - (fraction_bits << 23)


@functools.lru_cache(maxsize=1)
def _every_tanh():
    """int32 [51 x 2^17]: _tanh_of at every index."""
    unit = segments.load()["tanh"]
    index = np.arange(unit["c0"].size << unit["x_bits"], dtype=np.int32)
    return np.concatenate([_tanh_of(index[i:i + (1 << 20)]) for i in range(0, index.size, 1 << 20)])


def _tanh_approx_f16(h):
    """tanh.approx.f16 (MUFU.TANH.F16): MUFU.TANH of the exact float32 of h, rounded toward zero to f16 (its
    subnormals kept); a NaN gives the canonical 0x7FFF."""
    xp = namespace(h)
    b = bits(_tanh_approx_f32(_f16_to_f32(h)))
    r = _toward_zero_f16(b & _ABS) | ((b >> 16) & _F16_SIGN)
    return _to16(xp.where((b & _ABS) > _INF_BITS, i32(xp, b, _HALF_NAN), r))


def _tanh_approx_bf16(h):
    """tanh.approx.bf16 (MUFU.TANH.BF16): MUFU.TANH of the float32 of h (subnormals kept), its top 16 bits."""
    return _to16(bits(_tanh_approx_f32(floats(_from16(h) << 16))) >> 16)


rcp_approx_f32 = _public(_rcp_approx_f32)
rsqrt_approx_ftz_f32 = _public(_rsqrt_approx_ftz_f32)
rsqrt_approx_f32 = _public(_rsqrt_approx_f32)
sqrt_approx_ftz_f32 = _public(_sqrt_approx_ftz_f32)
sqrt_approx_f32 = _public(_sqrt_approx_f32)
lg2_approx_ftz_f32 = _public(_lg2_approx_ftz_f32)
lg2_approx_f32 = _public(_lg2_approx_f32)
sin_approx_f32 = sin_approx_ftz_f32 = _public(_sin_approx_f32)
cos_approx_f32 = cos_approx_ftz_f32 = _public(_cos_approx_f32)
ex2_approx_f16 = _public16(_ex2_approx_f16)
ex2_approx_ftz_bf16 = _public16(_ex2_approx_ftz_bf16)
tanh_approx_f32 = _public(_tanh_approx_f32)
tanh_approx_f16 = _public16(_tanh_approx_f16)
tanh_approx_bf16 = _public16(_tanh_approx_bf16)
