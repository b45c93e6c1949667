"""A bitwise model of FlashInfer 0.7.2.post1's fused routing from logits as the harness builds it
(routingCustom::run, SigmoidBiasPreprocess + ScaledSumNormalizePostprocess, FP32 in and out, sumEpsilon
1e-20; oracles/flashinfer_routing/fused_peer.cu): the reference its plug-in (examples/plugins/fi_fused.py)
is held to, beside the Muse Spark model of routing.py.

Where each step was read. Both kernels the library holds, routingIndicesBlockKernel (b <= 4) and
routingIndicesDynBlockKernel (b = 5..16), run the same warp-per-token path (TopKExpertSelect::apply:
SigmoidBiasPreprocess::apply, topk::reduceTopK, ScaledSumNormalizePostprocess::applyWithScores, which
recomputes the picks' sigmoids from the raw logits; neither reads smemAux). In the SASS of
build/flashinfer_oracle/libfi_fused_routing.so (``cuobjdump -sass``; nvcc 13.0 -O3, no fast-math, sm_90a)
each kernel holds 9 copies of the sigmoid below (8 experts a lane, then the lane's pick), the same float
operations with the same constants in both, and no MUFU.TANH:

1. sigmoid_accurate(x) = 0.5f * tanhf(0.5f * x) + 0.5f (RoutingKernel.cuh), tanhf as CUDA's libdevice
   compiles it (the PTX of ``sigmoid_accurate`` alone, tests/test_flashinfer_model_cpu.py, reads the same):
   h = FMUL(x, 0.5); a = |h|;
   |h| >= 0.6:  e = MUFU.EX2(FMUL(a, 2 log2 e)); r = MUFU.RCP(FADD(e, 1)); t = FFMA(r, -2, 1);
                t = 1 where a >= 9.0109138 (FSEL); big = t with h's sign (LOP3 0xb8 on 0x80000000);
   |h| < 0.6:   q = h * h; p = FFMA(q, C0, C1); p = FFMA(q, p, C2); p = FFMA(q, p, C3);
                p = FFMA(q, p, +0); small = FFMA(h, p, h);
   s = FFMA(tanh, 0.5, 0.5).
2. c = FADD(s, bias[e]) (loadScalar of an FP32 bias).
3. Top 8 of 256 by TopKRedType's key: cub's TwiddleIn of c's bits (sign set for c >= +0, all bits
   inverted for negatives: -0.0 below +0.0) in the high 32 bits, 65535 - e in the low (lowest expert wins
   among equal bits), compared as uint64 (ISETP.GT.U32 + .EX in the 8-element bitonic sort of each lane's
   experts e = 32 i + lane, then cg::reduce(greater) per round: on sm_90 no redux.sync, a shuffle tree of
   maxima over unique keys, whose order cannot change the winner). A lane whose sorted keys are used up
   is refilled with the key of (-inf, its expert 224 + lane); with 256 experts at least 224 keys (every
   expert e < 224 + lane) lie above it, so it never reaches the top 8 and the model leaves it out.
4. Pick k's lane holds s_k (the sigmoid recomputed from logits[e_k]: step 1 on the same input), lanes 8..31
   hold +0.0; the sum is cg::reduce(plus) as SHFL.BFLY 16, 8, 4, 2, 1, each followed by FADD(own, other),
   so every lane ends with ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)) up to the order of each FADD's
   operands (which IEEE addition ignores).
5. w_k = div.rn(FMUL(s_k, routeScale), FADD(sum, 1e-20)) (FMUL, FADD of the kernel parameters, then
   MUFU.RCP + FFMA refinement + FCHK and its slow path: IEEE division).

Metadata is FlashInfer's dyn-block metadata of these ids, which routing.metadata_rows models.
"""

import numpy as np

from kernel.layout import EXPERTS, TOP_K, WARP
from oracles.numpy_model._xp import bits, floats, i32, namespace, select
from oracles.numpy_model.ieee import div_rn_f32, fma_rn_f32
from oracles.numpy_model.primitives import add_rn, ex2_approx_ftz_f32, mul_rn, rcp_approx_ftz_f32
from oracles.numpy_model.routing import _broadcast, _check_float_array, _check_scale, _on, _take_rows

# Constants as float32 bit patterns, each read from the PTX of sigmoid_accurate (nvcc 13.0 -O3
# -arch=sm_90a) and the SASS of both kernels (FMUL/FFMA/FSETP immediates).
HALF = 0x3F000000  # 0.5: 0.5f * x, and the final FFMA's multiplier and addend
TWO_LOG2E = 0x4038AA3B  # 2 log2(e): FMUL |h| before MUFU.EX2
ONE = 0x3F800000  # FADD e + 1; FFMA r * -2 + 1; the saturated tanh
MINUS_TWO = 0xC0000000  # -2: FFMA r * -2 + 1
SATURATION = 0x41102CB4  # 9.0109138: |h| at and above it, tanh is +-1 (FSETP.GE, FSEL)
POLYNOMIAL_BELOW = 0x3F19999A  # 0.6: |h| below it, the odd polynomial (FSETP.GE, predicated FFMA)
POLYNOMIAL = (0x3C80F082, 0xBD563CAE, 0x3E085941, 0xBEAAA9ED)  # C0 (q's leading factor), C1, C2, C3
PLUS_ZERO = 0x00000000  # the polynomial's last FFMA addend (RZ)
SIGN = 0x80000000  # the copysign mask (LOP3.LUT 0xb8)
SUM_EPSILON = 0x1E3CE508  # 1e-20f: fused_peer.cu's mSumEpsilon, the runner's DeepSeekV3 value
INDEX_LIMIT = 65535  # TopKRedType::maxIdx: the key's low 16 bits are 65535 - expert
SHUFFLE_OFFSETS = (16, 8, 4, 2, 1)  # SHFL.BFLY of cg::reduce(plus), in SASS order


def _i32(like, value_bits):
    """An int32 scalar of the uint32 pattern ``value_bits`` that broadcasts against ``like``."""
    return i32(namespace(like), like, value_bits - (1 << 32) if value_bits >> 31 else value_bits)


def _f32(like, value_bits):
    """A float32 scalar of the given bits that broadcasts against ``like``."""
    return floats(_i32(like, value_bits))


def _tanhf(h):
    """CUDA's tanhf of float32 ``h`` as step 1 of the module's docstring computes it."""
    xp = namespace(h)
    a = xp.abs(h)
    e = ex2_approx_ftz_f32(mul_rn(a, _f32(h, TWO_LOG2E)))
    r = rcp_approx_ftz_f32(add_rn(e, _f32(h, ONE)))
    t = fma_rn_f32(r, _f32(h, MINUS_TWO), _f32(h, ONE))
    t = select(a >= _f32(h, SATURATION), _f32(h, ONE), t)
    big = floats((bits(t) & ~_i32(h, SIGN)) | (bits(h) & _i32(h, SIGN)))
    q = mul_rn(h, h)
    c0, c1, c2, c3 = (_f32(h, c) for c in POLYNOMIAL)
    p = fma_rn_f32(q, c0, c1)
    p = fma_rn_f32(q, p, c2)
    p = fma_rn_f32(q, p, c3)
    p = fma_rn_f32(q, p, _f32(h, PLUS_ZERO))
    small = fma_rn_f32(h, p, h)
    return xp.where(a >= _f32(h, POLYNOMIAL_BELOW), big, small)


def sigmoid_accurate_f32(x):
    """FlashInfer's sigmoid_accurate(x) = 0.5f * tanhf(0.5f * x) + 0.5f as its kernels compute it (float32
    NumPy array or torch tensor in and out)."""
    xp = namespace(x)
    if x.dtype != xp.float32:
        raise ValueError(f"x must be float32, got {x.dtype}")
    half = _f32(x, HALF)
    return fma_rn_f32(_tanhf(mul_rn(x, half)), half, half)


def order_keys(choice):
    """int64 [n, 256]: TopKRedType's uint64 key of each expert's c (float32 [n, 256]) minus 2^63, which
    orders the same: TwiddleIn(bits) - 2^31 (c's bits as int32, the low 31 inverted for negatives) times
    2^16, plus 65535 - expert."""
    xp = namespace(choice)
    b = bits(choice)
    ordered = b ^ ((b >> 31) & _i32(b, 0x7FFFFFFF))
    expert = xp.arange(EXPERTS, **_on(choice))
    wide = ordered.astype(np.int64) if xp is np else ordered.to(xp.int64)
    return wide * (INDEX_LIMIT + 1) + (INDEX_LIMIT - expert)


def _top_keys(xp, keys):
    """The TOP_K largest keys of each row, largest first (every key of a row is distinct)."""
    if xp is np:
        return -np.sort(-keys, axis=1)[:, :TOP_K]
    return xp.topk(keys, TOP_K, dim=1).values


def _warp_sum(xp, picked):
    """float32 [n, 32]: each lane's cg::reduce(plus) of the picks' sigmoids (lanes 0..7, +0.0 beyond)."""
    n = picked.shape[0]
    lanes = xp.zeros((n, WARP), dtype=xp.float32, **_on(picked))
    lanes[:, :TOP_K] = picked
    lane = xp.arange(WARP, **_on(picked))
    for offset in SHUFFLE_OFFSETS:
        lanes = add_rn(lanes, lanes[:, lane ^ offset])
    return lanes


def route_rows(logits, bias, scale, renormalize=True):
    """``route_flashinfer_fused`` without argument checks, on NumPy arrays or torch tensors (any device), for
    n rows at once, as routing.route_rows takes them: logits float32 [n, 256]; bias float32 [256] or [n, 256];
    scale float32 [] or [n]. FlashInfer's routing always renormalizes: ``renormalize`` (taken for the
    harness's one signature of a reference) changes nothing, and the harness calls FlashInfer on
    renormalize=True alone (its declaration). Returns (ids int32 [n, 8], weights float32 [n, 8])."""
    xp = namespace(logits)
    n = logits.shape[0]
    score = sigmoid_accurate_f32(logits)
    choice = add_rn(score, _broadcast(xp, bias, score.shape))
    top = _top_keys(xp, order_keys(choice))
    expert = INDEX_LIMIT - (top & INDEX_LIMIT)
    ids = expert.astype(np.int32) if xp is np else expert.to(xp.int32)
    picked = _take_rows(xp, score, ids)
    total = _warp_sum(xp, picked)[:, :TOP_K]
    scaled = mul_rn(picked, _broadcast(xp, _broadcast(xp, scale, (n,))[:, None], picked.shape))
    epsilon = _broadcast(xp, _f32(logits, SUM_EPSILON), total.shape)
    return ids, div_rn_f32(scaled, add_rn(total, epsilon))


def route_flashinfer_fused(logits, bias, scale, renormalize=True):
    """(ids int32 [b, 8], weights float32 [b, 8]) of FlashInfer's fused routing: the top 8 of
    sigmoid_accurate(logits) + bias by TopKRedType's key (lowest expert among equal bits; -0.0 below +0.0),
    weights s_k * scale / (warp sum of the picks' s + 1e-20), each step as the module's docstring says.

    logits float32 [b, 256] (any b >= 1), bias float32 [256], no NaN in either, NumPy arrays or torch tensors
    of one device; scale rounded to float32, finite there; renormalize True (FlashInfer has no other form).
    """
    _check_float_array("logits", logits, "[b, 256]", 2)
    _check_float_array("bias", bias, "[256]", 1, like=logits)
    if renormalize is not True and renormalize is not np.True_:
        raise ValueError(f"renormalize must be True (FlashInfer's fused routing always renormalizes), got "
                         f"{renormalize!r}")
    scale32 = _check_scale(scale)
    if namespace(logits) is not np:
        scale32 = namespace(logits).tensor(float(scale32), dtype=logits.dtype, device=logits.device)
    with np.errstate(all="ignore"):
        return route_rows(logits, bias, scale32, True)
