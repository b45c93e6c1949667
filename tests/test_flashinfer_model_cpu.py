"""The model of FlashInfer's fused routing (oracles/numpy_model/flashinfer_fused.py) held to what nvcc emits
and to what the built library's SASS holds, plus its edge cases with expectations derived from the SASS's
semantics, and its exact float64-based FFMA and division (oracles/numpy_model/ieee.py) against exact
rational arithmetic."""

import shutil
import subprocess
from fractions import Fraction

import numpy as np
import pytest
import torch

from oracles.flashinfer_routing import build
from oracles.numpy_model import ex2_approx_ftz_f32, rcp_approx_ftz_f32
from oracles.numpy_model import flashinfer_fused as fi
from oracles.numpy_model.ieee import div_rn_f32, fma_rn_f32
from oracles.ptx.reader import instructions
from oracles.ptx.sass import cuobjdump

NVCC = shutil.which("nvcc")
# sigmoid_accurate exactly as RoutingKernel.cuh defines it (read from the installed sources by the test
# below), compiled alone as the library's flags compile it (build.py: -O3, no fast-math, sm_90a).
KERNEL = """
{definition}
extern "C" __global__ void sigmoid_kernel(float const* x, float* y) {{
  y[threadIdx.x] = sigmoid_accurate(x[threadIdx.x]);
}}
"""


def _definition():
    header = build.flashinfer_data_dir() / "include/flashinfer/trtllm/fused_moe/RoutingKernel.cuh"
    lines = [line for line in header.read_text().splitlines() if "float sigmoid_accurate(float x)" in line]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.fixture(scope="module")
def sigmoid_ptx(tmp_path_factory):
    reason = build.unavailable()  # nvcc, and FlashInfer's sources (RoutingKernel.cuh) installed
    if reason is not None:
        pytest.skip(f"{build.NOT_RUN}: {reason}")
    folder = tmp_path_factory.mktemp("sigmoid")
    source = folder / "sigmoid.cu"
    source.write_text(KERNEL.format(definition=_definition()))
    subprocess.run([NVCC, "-O3", "-arch=sm_90a", "-ptx", str(source), "-o", str(folder / "sigmoid.ptx")],
                   check=True, capture_output=True)
    return (folder / "sigmoid.ptx").read_text()


def _immediate(operand):
    return int(operand[2:], 16) if operand.startswith("0f") else None


def _float_ops(ptx):
    """(opcode, immediates) of each float instruction between the load and the store, in order; a register
    that a mov.f32 set to an immediate reads as that immediate, and the mov is dropped."""
    constants, ops = {}, []
    for i in instructions(ptx):
        if not i.opcode.endswith(".f32") or i.opcode.startswith(("ld", "st")):
            continue
        if i.opcode == "mov.f32" and _immediate(i.operands[1]) is not None:
            constants[i.operands[0]] = _immediate(i.operands[1])
            continue
        values = (constants.get(o, _immediate(o)) for o in i.operands[1:])
        ops.append((i.opcode, tuple(v for v in values if v is not None)))
    return ops


# The model's sequence, in its own constants (what the model applies, not copied from any PTX).
MODEL_SEQUENCE = [
    ("mul.f32", (fi.HALF,)),
    ("abs.f32", ()),
    ("mul.f32", (fi.TWO_LOG2E,)),
    ("ex2.approx.ftz.f32", ()),
    ("add.f32", (fi.ONE,)),
    ("rcp.approx.ftz.f32", ()),
    ("fma.rn.f32", (fi.MINUS_TWO, fi.ONE)),
    ("setp.ge.f32", (fi.SATURATION,)),
    ("selp.f32", (fi.ONE,)),
    ("copysign.f32", ()),
    ("mul.f32", ()),
    ("fma.rn.f32", fi.POLYNOMIAL[:2]),
    ("fma.rn.f32", fi.POLYNOMIAL[2:3]),
    ("fma.rn.f32", fi.POLYNOMIAL[3:4]),
    ("fma.rn.f32", (fi.PLUS_ZERO,)),
    ("fma.rn.f32", ()),
    ("setp.ge.f32", (fi.POLYNOMIAL_BELOW,)),
    ("selp.f32", ()),
    ("fma.rn.f32", (fi.HALF, fi.HALF)),
]


def test_nvcc_emits_the_sequence_the_model_applies(sigmoid_ptx):
    assert _float_ops(sigmoid_ptx) == MODEL_SEQUENCE


def test_the_model_computes_each_step_of_that_sequence():
    """Step by step from the primitives, on every regime of |x / 2| (polynomial, exponential, saturated,
    the two thresholds and their float neighbours, signed zeros, infinities)."""
    edges = [fi.SATURATION, fi.POLYNOMIAL_BELOW]
    halves = [np.uint32(e + d).view(np.float32) for e in edges for d in (-1, 0, 1)]
    h = np.array(halves + [0.0, 1e-3, 0.3, 0.59, 1.0, 4.0, 12.0, 50.0, np.inf], np.float32)
    x = np.concatenate([h, -h]) * np.float32(2)  # exact: x / 2 is h
    f = lambda b: np.uint32(b).view(np.float32)  # noqa: E731
    half = x * f(fi.HALF)
    a = np.abs(half)
    t = fma_rn_f32(rcp_approx_ftz_f32(ex2_approx_ftz_f32(a * f(fi.TWO_LOG2E)) + f(fi.ONE)), np.float32(-2), f(fi.ONE))
    t = np.where(a >= f(fi.SATURATION), f(fi.ONE), t)
    big = np.copysign(t, half)
    q = half * half
    p = fma_rn_f32(q, f(fi.POLYNOMIAL[0]), f(fi.POLYNOMIAL[1]))
    for c in (fi.POLYNOMIAL[2], fi.POLYNOMIAL[3], fi.PLUS_ZERO):
        p = fma_rn_f32(q, p, f(c))
    tanh = np.where(a >= f(fi.POLYNOMIAL_BELOW), big, fma_rn_f32(half, p, half))
    want = fma_rn_f32(tanh, f(fi.HALF), f(fi.HALF))
    np.testing.assert_array_equal(fi.sigmoid_accurate_f32(x).view(np.uint32), want.view(np.uint32))


@pytest.fixture(scope="module")
def library_sass():
    library = build.FUSED_LIBRARY
    if not library.is_file():
        pytest.skip(f"{build.NOT_RUN}: no {library} (make flashinfer-oracle)")
    text = subprocess.run([str(cuobjdump()), "-sass", str(library)], check=True, capture_output=True,
                          text=True).stdout
    kernels = {}
    for part in text.split("Function : ")[1:]:
        name = "routingIndicesBlockKernel" if "routingIndicesBlockKernel" in part.split("\n", 1)[0] \
            else "routingIndicesDynBlockKernel"
        kernels[name] = part
    assert set(kernels) == {"routingIndicesBlockKernel", "routingIndicesDynBlockKernel"}
    return kernels


def _hex_float(bits_):
    return repr(float(np.uint32(bits_).view(np.float32)))


@pytest.mark.parametrize("kernel", ["routingIndicesBlockKernel", "routingIndicesDynBlockKernel"])
def test_each_kernel_of_the_library_runs_the_modelled_sigmoid_and_sum(library_sass, kernel):
    """9 sigmoids (8 experts a lane, the pick's recomputed), no MUFU.TANH, the model's thresholds, and the
    butterfly sum in the model's shuffle order right before sum + epsilon."""
    sass = library_sass[kernel]
    assert "MUFU.TANH" not in sass
    assert sass.count("MUFU.EX2") == 9
    for threshold in (fi.SATURATION, fi.POLYNOMIAL_BELOW):
        value = np.uint32(threshold).view(np.float32)
        shown = [line for line in sass.splitlines() if "FSETP.GE.AND" in line and "|R" in line]
        assert sum(np.float32(line.split(",")[-2].strip()) == value for line in shown) == 9, threshold
    lines = [line.split(";")[0] for line in sass.splitlines()]
    start = max(i for i, line in enumerate(lines) if "MUFU.EX2" in line)  # the pick's recomputed sigmoid
    end = next(i for i in range(start, len(lines)) if "FADD" in lines[i] and "UR" in lines[i])  # sum + epsilon
    window = [line.split("*/")[-1].split() for line in lines[start:end]]
    shuffles = [(op[-3].rstrip(","), int(op[-2].rstrip(","), 16)) for op in window if "SHFL.BFLY" in op]
    assert tuple(offset for _, offset in shuffles) == fi.SHUFFLE_OFFSETS
    adds = [op for op in window if op and op[0] == "FADD"]
    for (source, _), add in zip(shuffles, adds[-len(shuffles):]):
        assert source.split(".")[0] + "," in " ".join(add[2:]) + ",", (source, add)  # the FADD reads it


# Edge cases; each expectation derived from the SASS semantics, not from the model.

def _route(logits, bias, scale=1.0):
    return fi.route_flashinfer_fused(np.asarray(logits, np.float32), np.asarray(bias, np.float32), scale)


def test_saturation_makes_the_sigmoid_exactly_one_or_zero():
    """At |x / 2| >= 0x41102CB4 the FSEL writes tanh = +-1; then FFMA(+-1, 0.5, 0.5) is exactly 1 or +0."""
    edge = np.uint32(fi.SATURATION).view(np.float32) * np.float32(2)
    s = fi.sigmoid_accurate_f32(np.array([edge, -edge, np.inf, -np.inf], np.float32))
    assert s.view(np.uint32).tolist() == [0x3F800000, 0, 0x3F800000, 0]
    below = np.nextafter(edge, np.float32(0))
    inside = fi.sigmoid_accurate_f32(np.array([below, -below], np.float32))
    assert 0 < inside[1] and inside[0] <= 1  # the tanh branch: 1 - 2 rcp(e + 1), e = 2^(2|h| log2 e)


def test_signed_zero_logits_give_one_half():
    """x = -0.0: h = -0.0, the polynomial branch gives FFMA(h, p, h) = -0.0 (p = FFMA(q, p, +0) = +0, q = +0),
    then FFMA(-0.0, 0.5, 0.5) = 0.5."""
    s = fi.sigmoid_accurate_f32(np.array([0.0, -0.0], np.float32))
    assert s.view(np.uint32).tolist() == [0x3F000000, 0x3F000000]


def test_ties_go_to_the_lowest_expert_and_minus_zero_sorts_below_plus_zero():
    """TopKRedType: equal twiddled bits tie on 65535 - expert (the lowest expert wins); TwiddleIn puts -0.0
    (0x80000000 -> 0x7FFFFFFF) below +0.0 (-> 0x80000000). A -0.0 choice cannot come out of s + bias (s >= +0,
    and x + (-x) is +0.0 in round to nearest), so the key is checked on its own."""
    ids, _ = _route(np.zeros((1, 256)), np.zeros(256))
    assert ids.tolist() == [list(range(8))]
    keys = fi.order_keys(np.array([[-0.0, 0.0] + [-1.0] * 254], np.float32))
    assert keys[0, 1] > keys[0, 0] > keys[0, 2]
    assert (keys[0, 2] - keys[0, 3]) == 1  # equal values: the lower expert has the larger key


def test_saturated_logits_tie_in_flashinfer_where_the_model_would_not():
    """Logits 20 and 30 both saturate (|x / 2| >= 9.0109): equal sigmoids, so the lower expert wins."""
    logits = np.full((1, 256), -30.0)
    logits[0, 5], logits[0, 3] = 20.0, 30.0
    ids, weights = _route(logits, np.zeros(256))
    assert ids[0, :2].tolist() == [3, 5]
    assert weights[0, 0] == weights[0, 1]


def test_the_weights_are_the_ieee_quotient_of_the_butterfly_sum():
    """Eight equal picks of s = 0.5 and six zeros: sum is 4 exactly, w = (0.5 * scale) / (4 + 1e-20)."""
    logits = np.full((1, 256), -30.0)
    logits[0, :8] = 0.0
    _, weights = _route(logits, np.zeros(256), 3.0)
    want = np.float32(1.5) / (np.float32(4) + np.uint32(fi.SUM_EPSILON).view(np.float32))
    assert weights.view(np.uint32).tolist() == [[int(want.view(np.uint32))] * 8]


def test_bad_arguments_are_named():
    good = np.zeros((1, 256), np.float32)
    with pytest.raises(ValueError, match="^logits"):
        fi.route_flashinfer_fused(good.astype(np.float64), good[0], 1.0)
    with pytest.raises(ValueError, match="^renormalize"):
        fi.route_flashinfer_fused(good, good[0], 1.0, renormalize=False)
    with pytest.raises(ValueError, match="^scale"):
        fi.route_flashinfer_fused(good, good[0], float("nan"))
    with pytest.raises(ValueError, match="^x must be float32"):
        fi.sigmoid_accurate_f32(good.astype(np.float64))


def test_numpy_and_torch_forms_agree():
    rng = np.random.default_rng(3)
    logits = (rng.standard_normal((64, 256)) * 8).astype(np.float32)
    bias = (rng.standard_normal(256) * 0.01).astype(np.float32)
    ids, weights = fi.route_flashinfer_fused(logits, bias, 2.5)
    tids, tweights = fi.route_flashinfer_fused(torch.from_numpy(logits), torch.from_numpy(bias), 2.5)
    np.testing.assert_array_equal(tids.numpy(), ids)
    np.testing.assert_array_equal(tweights.numpy().view(np.uint32), weights.view(np.uint32))


# FFMA and division against exact rationals, rounded to float32 by integers alone.

def _round_f32(q):
    """The float32 nearest the Fraction ``q`` (ties to even; subnormals kept; overflow to inf)."""
    if q == 0:
        return np.float32(0.0)
    sign, q = (-1 if q < 0 else 1), abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    while Fraction(2) ** e > q:
        e -= 1
    while Fraction(2) ** (e + 1) <= q:
        e += 1
    quantum = Fraction(2) ** (max(e, -126) - 23)
    units, rest = divmod(q, quantum)
    units = int(units) + (rest > quantum / 2 or (rest == quantum / 2 and int(units) % 2 == 1))
    value = units * quantum
    if value >= Fraction(2) ** 128 - Fraction(2) ** 103:
        return np.float32(sign * np.inf)
    return np.float32(sign * float(value))  # exact: value is a float32


def _draw(rng, n):
    """float32 values over every binade, subnormals and halfway-prone significands included."""
    raw = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    x = raw.view(np.float32)
    return np.where(np.isfinite(x), x, np.float32(1.5))


# a * b + c = 256 + 2^-15 + 2^-16 - 2^-62 (a = 2^-16 (1 + 2^-23), b = 1 - 2^-23, c = 256 + 2^-15): just below
# the float32 midpoint 256 + 2^-15 + 2^-16, so the nearest float32 is c (0x43800001); a float64 sum rounds
# onto the midpoint first, and its tie to even would give 0x43800002.
DOUBLE_ROUNDING = (0x37800001, 0x3F7FFFFE, 0x43800001)


def test_fma_and_division_are_correctly_rounded():
    rng = np.random.default_rng(7)
    a, b, c = (_draw(rng, 3000) for _ in range(3))
    # products near c's magnitude, so the addition cancels and rounds where double rounding would bite
    with np.errstate(over="ignore"):
        c2 = (-(a.astype(np.float64) * b) * (1 + rng.choice([0, 2**-24, -2**-25], 3000))).astype(np.float32)
    c = np.where((rng.random(3000) < 0.5) & np.isfinite(c2), c2, c)
    a[0], b[0], c[0] = (np.uint32(v).view(np.float32) for v in DOUBLE_ROUNDING)
    with np.errstate(all="ignore"):
        got = fma_rn_f32(a, b, c)
        quotient = div_rn_f32(a, b)
    for i in range(3000):
        exact = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
        assert got[i].view(np.uint32) == _round_f32(exact).view(np.uint32), (a[i], b[i], c[i])
        if b[i] != 0:
            assert quotient[i].view(np.uint32) == _round_f32(Fraction(float(a[i])) / Fraction(float(b[i]))).view(
                np.uint32), (a[i], b[i])
