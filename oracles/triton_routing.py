"""Triton oracle for Muse Spark's decode routing: `_routing_kernel` and `fused_musespark1x_routing`.

The production kernel must be bitwise equal to this function as Muse Spark calls it. The kernel is
written the way a Triton author writes it (tl.sigmoid, +, /, *, one argmax per round) so that the PTX
Triton 3.6.0 emits for it is an independent reference for the kernel's inline PTX.
"""

import numpy as np
import torch
import triton
import triton.language as tl

from kernel.layout import EXPERTS as N_EXPERTS
from kernel.layout import TOP_K

# One warp per token row: each thread holds N_EXPERTS / 32 experts; reductions stay inside the warp.
NUM_WARPS = 1
ROUTER_SCORE_DIVISION_EPS = 1e-15
# Every pointer the kernel gets is 16-byte aligned, so the launched kernel is always the one variant that
# `oracles.triton_codegen` compiles ahead of time (Triton specializes pointers on 16-byte divisibility).
POINTER_ALIGNMENT = 16
_MAX_FLOAT32 = float(np.finfo(np.float32).max)


@triton.jit
def _routing_kernel(logits_ptr, bias_ptr, weights_ptr, ids_ptr, scale, RENORMALIZE: tl.constexpr,
                    EXPERTS: tl.constexpr, K: tl.constexpr, EPS: tl.constexpr):
    """One program per token row: top-K experts of sigmoid(logits) + bias, and their weights.

    Round k picks the largest c = s + bias among the experts not yet chosen, the lowest expert among
    equal values (float equality: -0.0 == +0.0, -inf == -inf). Weights are s_k * (scale / (total + EPS))
    with total = 0.0 + s_0 + ... + s_{K-1} in pick order when RENORMALIZE, else s_k * scale.
    """
    row = tl.program_id(0).to(tl.int64)
    experts = tl.arange(0, EXPERTS)
    ranks = tl.arange(0, K)
    s = tl.sigmoid(tl.load(logits_ptr + row * EXPERTS + experts))
    c = s + tl.load(bias_ptr + experts)
    s_bits = s.to(tl.int32, bitcast=True)

    chosen = tl.zeros([EXPERTS], dtype=tl.int1)
    ids = tl.zeros([K], dtype=tl.int32)
    picked = tl.zeros([K], dtype=tl.float32)
    total = 0.0
    for k in tl.static_range(K):
        # Chosen experts are excluded by the mask, not by their value: every remaining c may be -inf.
        best = tl.max(tl.where(chosen, float("-inf"), c), axis=0)
        expert = tl.min(tl.where((c == best) & ~chosen, experts, EXPERTS), axis=0)
        this = experts == expert
        chosen = chosen | this
        # The chosen score moves as bits (an integer sum with one nonzero term): no float arithmetic.
        p = tl.sum(tl.where(this, s_bits, 0), axis=0).to(tl.float32, bitcast=True)
        ids = tl.where(ranks == k, expert, ids)
        picked = tl.where(ranks == k, p, picked)
        if RENORMALIZE:
            total = total + p
    if RENORMALIZE:
        weights = picked * (scale / (total + EPS))
    else:
        weights = picked * scale
    tl.store(weights_ptr + row * K + ranks, weights)
    tl.store(ids_ptr + row * K + ranks, ids)


def kernel_constexprs(renormalize: bool) -> dict:
    """The compile-time arguments of _routing_kernel, shared by the launch and the ahead-of-time build."""
    return {"RENORMALIZE": bool(renormalize), "EXPERTS": N_EXPERTS, "K": TOP_K, "EPS": ROUTER_SCORE_DIVISION_EPS}


def fused_musespark1x_routing(logits, bias, top_k=8, renormalize=True, routed_scaling_factor=1.0,
                              router_score_division_eps=1e-15, scoring_func="sigmoid", output_multiplier=None,
                              *, out_weights=None, out_ids=None):
    """Route each token row: returns (weights float32 [b, 8], ids int32 [b, 8]) like a vLLM fused router.

    Contract: logits float32 [b, 256] and bias float32 [256], contiguous, on one CUDA device, no NaN;
    only Muse Spark's call is implemented: top_k 8, sigmoid scores, eps 1e-15, no output multiplier.
    out_weights / out_ids, when given, are written in place; with both given, a call under CUDA graph
    capture allocates nothing. The NaN check reads the values, so it runs only outside capture.
    Raises ValueError naming the argument before anything is written.
    """
    _check_call(top_k, renormalize, routed_scaling_factor, router_score_division_eps, scoring_func,
                output_multiplier)
    _check_float_tensor("logits", logits, 2)
    b = logits.shape[0]
    _check_float_tensor("bias", bias, 1)
    _check_output("out_weights", out_weights, torch.float32, b)
    _check_output("out_ids", out_ids, torch.int32, b)
    _check_disjoint(logits, bias, out_weights, out_ids)
    _check_devices(logits, bias, out_weights, out_ids)
    if not torch.cuda.is_current_stream_capturing():
        _check_no_nan("logits", logits)
        _check_no_nan("bias", bias)
    weights = torch.empty((b, TOP_K), dtype=torch.float32, device=logits.device) if out_weights is None \
        else out_weights
    ids = torch.empty((b, TOP_K), dtype=torch.int32, device=logits.device) if out_ids is None else out_ids
    if b:
        launch(logits, bias, weights, ids, routed_scaling_factor, renormalize)
    return weights, ids


def launch(logits, bias, weights, ids, scale, renormalize):
    """Launch _routing_kernel on checked arguments, one program per row; returns Triton's compiled kernel."""
    with torch.cuda.device(logits.device):
        return _routing_kernel[(logits.shape[0],)](logits, bias, weights, ids, float(np.float32(scale)),
                                                   **kernel_constexprs(renormalize), num_warps=NUM_WARPS)


def _check_call(top_k, renormalize, routed_scaling_factor, eps, scoring_func, output_multiplier):
    """The keyword arguments must be Muse Spark's call."""
    if not _is_integer(top_k) or top_k != TOP_K:
        raise ValueError(f"top_k must be {TOP_K} (the only routing implemented), got {top_k!r}")
    if not isinstance(renormalize, (bool, np.bool_)):
        raise ValueError(f"renormalize must be a bool, got {renormalize!r}")
    if not (_is_integer(routed_scaling_factor) or _is_float(routed_scaling_factor)) \
            or not abs(routed_scaling_factor) <= _MAX_FLOAT32:
        raise ValueError("routed_scaling_factor must be a real number, finite in float32, got "
                         f"{routed_scaling_factor!r}")
    if not _is_float(eps) or np.float32(eps) != np.float32(ROUTER_SCORE_DIVISION_EPS):
        raise ValueError(f"router_score_division_eps must be {ROUTER_SCORE_DIVISION_EPS} (in float32), got {eps!r}")
    if scoring_func != "sigmoid":
        raise ValueError(f"scoring_func must be 'sigmoid' (the only scoring implemented), got {scoring_func!r}")
    if output_multiplier is not None:
        raise ValueError(f"output_multiplier must be None (not implemented), got {output_multiplier!r}")


def _is_integer(x):
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _is_float(x):
    return isinstance(x, (float, np.floating))


def _check_float_tensor(name, t, ndim):
    """`t` must be a contiguous, 16-byte aligned float32 tensor of `ndim` dims with N_EXPERTS columns."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != torch.float32:
        raise ValueError(f"{name} must be float32, got {t.dtype}")
    if t.dim() != ndim or t.shape[-1] != N_EXPERTS:
        want = "[b, 256]" if ndim == 2 else "[256]"
        raise ValueError(f"{name} must have shape {want}, got {list(t.shape)}")
    _check_layout(name, t)


def _check_output(name, t, dtype, b):
    """A preallocated output must be a contiguous, 16-byte aligned `dtype` tensor of shape [b, 8]."""
    if t is None:
        return
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor or None, got {type(t).__name__}")
    if t.dtype != dtype:
        raise ValueError(f"{name} must be {dtype}, got {t.dtype}")
    if list(t.shape) != [b, TOP_K]:
        raise ValueError(f"{name} must have shape [{b}, {TOP_K}] (b from logits), got {list(t.shape)}")
    _check_layout(name, t)


def _check_layout(name, t):
    """Row-major contiguous and 16-byte aligned."""
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous")
    if t.data_ptr() % POINTER_ALIGNMENT:
        raise ValueError(f"{name} must start on a {POINTER_ALIGNMENT}-byte boundary")


def _check_devices(logits, bias, out_weights, out_ids):
    """Every tensor on the CUDA device of logits."""
    if logits.device.type != "cuda":
        raise ValueError(f"logits must be on a CUDA device, got {logits.device}")
    for name, t in (("bias", bias), ("out_weights", out_weights), ("out_ids", out_ids)):
        if t is not None and t.device != logits.device:
            raise ValueError(f"{name} must be on the device of logits ({logits.device}), got {t.device}")


def _check_disjoint(logits, bias, out_weights, out_ids):
    """Outputs must not overlap the inputs or each other."""
    inputs = [("logits", logits), ("bias", bias)]
    for out_name, out in (("out_weights", out_weights), ("out_ids", out_ids)):
        if out is None:
            continue
        for name, t in inputs:
            if _overlap(out, t):
                raise ValueError(f"{out_name} must not overlap {name}")
        inputs.append((out_name, out))


def _overlap(a, b):
    """Whether the memory spans of two contiguous tensors on one device intersect."""
    if a.device != b.device or not a.numel() or not b.numel():
        return False
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b.numel() * b.element_size() and b0 < a0 + a.numel() * a.element_size()


def _check_no_nan(name, t):
    """NaN is outside the routing's domain."""
    if torch.isnan(t).any().item():
        raise ValueError(f"{name} must not contain NaN (outside the routing's domain)")
