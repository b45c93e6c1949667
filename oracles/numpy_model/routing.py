"""Routing semantics of the model: top-8 selection, weights, and the TRT-LLM-gen metadata."""

import numpy as np

from kernel.layout import (
    EXPERTS,
    MAX_TILE,
    MAX_TOKENS,
    META_CTA_BATCH,
    META_CTA_LIMIT,
    META_EXPANDED_TO_PERMUTED,
    META_NUM_CTAS,
    META_PADDED_TOKENS,
    META_PERMUTED_TO_TOKEN,
    TOP_K,
    metadata_size,
)
from oracles.numpy_model.primitives import add_rn, div_full_f32, mul_rn, sigmoid_f32

ROUTER_EPS = np.float32(1e-15)  # bits 0x26901D7D
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _check_float_array(name, x, shape_text, ndim):
    if not isinstance(x, np.ndarray) or x.dtype != np.float32:
        raise ValueError(f"{name} must be a float32 NumPy array {shape_text}, got "
                         f"{getattr(x, 'dtype', type(x).__name__)}")
    if x.ndim != ndim or x.shape[-1] != EXPERTS or x.size == 0:
        raise ValueError(f"{name} must have shape {shape_text}, got {x.shape}")
    if np.isnan(x).any():
        raise ValueError(f"{name} holds NaN: NaN is outside the routing domain")


def _check_scale(scale):
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating, np.integer)):
        raise ValueError(f"scale must be a real number, got {type(scale).__name__}")
    with np.errstate(over="ignore"):
        s32 = np.float32(scale)
    if not np.isfinite(s32):
        raise ValueError(f"scale must be finite in float32, got {scale!r}")
    return s32


def route(logits, bias, scale, renormalize=True):
    """(ids int32 [b, 8], weights float32 [b, 8]) of the top 8 of sigmoid(logits) + bias.

    logits: float32 [b, 256], b >= 1; bias: float32 [256]; no NaN in either. Each of 8 rounds picks the
    largest c = s + bias among the experts not yet picked, the lowest index among equal values (-0.0 equals
    +0.0, -inf is an ordinary value). Weights use the sigmoid score s of each pick: s_k * (scale / (total +
    1e-15)) with total summed in pick order from 0.0, or s_k * scale without renormalize. ``scale`` is
    rounded to float32 and must be finite there.
    """
    _check_float_array("logits", logits, "[b, 256]", 2)
    _check_float_array("bias", bias, "[256]", 1)
    scale = _check_scale(scale)
    rows = np.arange(logits.shape[0])
    score = sigmoid_f32(logits)
    choice = add_rn(score, np.broadcast_to(bias, score.shape))
    taken = np.zeros(choice.shape, bool)
    ids = np.empty((logits.shape[0], TOP_K), np.int32)
    for k in range(TOP_K):
        best = np.where(taken, -np.inf, choice).max(axis=1, keepdims=True)
        pick = np.argmax((choice == best) & ~taken, axis=1)
        ids[:, k] = pick
        taken[rows, pick] = True
    picked = np.take_along_axis(score, ids.astype(np.intp), axis=1)
    if not renormalize:
        return ids, mul_rn(picked, np.full_like(picked, scale))
    total = np.zeros(len(rows), np.float32)
    for k in range(TOP_K):
        total = add_rn(total, picked[:, k])
    inverse = div_full_f32(np.full_like(total, scale), add_rn(total, np.full_like(total, ROUTER_EPS)))
    return ids, mul_rn(picked, np.repeat(inverse[:, None], TOP_K, axis=1))


def _check_int(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise ValueError(f"{name} must be an int in [{low}, {high}], got {value!r}")
    return int(value)


def _check_ids(ids):
    if not isinstance(ids, np.ndarray) or ids.dtype != np.int32:
        raise ValueError(f"ids must be an int32 NumPy array [b, 8], got {getattr(ids, 'dtype', type(ids).__name__)}")
    if ids.ndim != 2 or ids.shape[1] != TOP_K or not 1 <= ids.shape[0] <= MAX_TOKENS:
        raise ValueError(f"ids must have shape [b, {TOP_K}] with 1 <= b <= {MAX_TOKENS}, got {ids.shape}")
    if ids.min() < 0 or ids.max() >= EXPERTS:
        raise ValueError(f"ids must lie in [0, {EXPERTS}), got {ids.min()}..{ids.max()}")
    if (np.sort(ids, axis=1)[:, 1:] == np.sort(ids, axis=1)[:, :-1]).any():
        raise ValueError("ids must not repeat an expert within a token row")


def routing_metadata(ids, local_expert_offset, num_local_experts, tile_n, fill=-(2**31)):
    """int32 [metadata_size(tile_n)]: the metadata of local experts [offset, offset + num) for GEMM tile tile_n.

    Semantics of FlashInfer's routingIndicesDynBlockKernel: per local expert e, count = its tokens, ctas =
    ceil(count / tile_n), first CTA = exclusive sum of ctas in expert order; CTA i of e gets batch index
    e - offset and row limit min((i + 1) * tile_n, first * tile_n + count); e's rows hold its token ids in
    token order, then -1 up to the end of its last CTA; route t * 8 + k maps to its row, or -1 when its
    expert is another rank's. Elements the kernel does not write (entries past 8b routes, past the CTA
    count and the padded rows, and the guard) keep ``fill``.
    """
    _check_ids(ids)
    offset = _check_int("local_expert_offset", local_expert_offset, 0, EXPERTS)
    count_local = _check_int("num_local_experts", num_local_experts, 0, EXPERTS - offset)
    tile = _check_int("tile_n", tile_n, 1, MAX_TILE)
    fill = _check_int("fill", fill, _INT32_MIN, _INT32_MAX)
    out = np.full(metadata_size(tile), fill, np.int32)
    routes = ids.reshape(-1)
    out[META_EXPANDED_TO_PERMUTED:META_EXPANDED_TO_PERMUTED + routes.size] = -1
    cta = 0
    for local in range(count_local):
        route_ids = np.flatnonzero(routes == offset + local)  # in token order: one route per token
        if route_ids.size == 0:
            continue
        first_row = cta * tile
        ctas = -(-route_ids.size // tile)
        for i in range(cta, cta + ctas):
            out[META_CTA_BATCH + i] = local
            out[META_CTA_LIMIT + i] = min((i + 1) * tile, first_row + route_ids.size)
        rows = META_PERMUTED_TO_TOKEN + first_row
        out[rows:rows + route_ids.size] = route_ids // TOP_K
        out[rows + route_ids.size:rows + ctas * tile] = -1
        out[META_EXPANDED_TO_PERMUTED + route_ids] = first_row + np.arange(route_ids.size)
        cta += ctas
    out[META_PADDED_TOKENS] = cta * tile
    out[META_NUM_CTAS] = cta
    return out
