"""Routing semantics of the model: top-8 selection, weights, and the TRT-LLM-gen metadata."""

import numpy as np

from kernel.layout import (
    EXPERTS,
    MAX_CTAS,
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
from oracles.numpy_model._xp import namespace
from oracles.numpy_model.primitives import add_rn, div_full_f32, mul_rn, sigmoid_f32

ROUTER_EPS = np.float32(1e-15)  # bits 0x26901D7D
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _library(x):
    """numpy for an ndarray, torch for a tensor, else None."""
    try:
        return namespace(x) if not isinstance(x, np.generic) else None
    except ValueError:
        return None


def _check_float_array(name, x, shape_text, ndim, like=None):
    """The array library of ``x``, a float32 NumPy array or torch tensor of ``ndim`` dimensions, the last 256,
    free of NaN (and of ``like``'s library and device); ValueError naming ``name`` otherwise."""
    xp = _library(x)
    if xp is None or x.dtype != xp.float32:
        raise ValueError(f"{name} must be a float32 NumPy array or torch tensor {shape_text}, got "
                         f"{getattr(x, 'dtype', type(x).__name__)}")
    if x.ndim != ndim or x.shape[-1] != EXPERTS or 0 in x.shape:
        raise ValueError(f"{name} must have shape {shape_text}, got {tuple(x.shape)}")
    if like is not None and (xp is not _library(like) or getattr(x, "device", None) != getattr(like, "device", None)):
        raise ValueError(f"{name} must be of the library and device of logits, got {type(x).__name__} on "
                         f"{getattr(x, 'device', 'the host')}")
    if bool(xp.isnan(x).any()):
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

    logits: float32 [b, 256], any b >= 1 (the model has no row limit; the kernel's contract is 1 <= b <= 8);
    bias: float32 [256]; NumPy arrays, or torch tensors of one device (the outputs are then tensors there);
    no NaN in either; renormalize a bool. Each of 8 rounds picks the
    largest c = s + bias among the experts not yet picked, the lowest index among equal values (-0.0 equals
    +0.0, -inf is an ordinary value). Weights use the sigmoid score s of each pick: s_k * (scale / (total +
    1e-15)) with total summed in pick order from 0.0, or s_k * scale without renormalize. ``scale`` is
    rounded to float32 and must be finite there.
    """
    _check_float_array("logits", logits, "[b, 256]", 2)
    _check_float_array("bias", bias, "[256]", 1, like=logits)
    if not isinstance(renormalize, (bool, np.bool_)):
        raise ValueError(f"renormalize must be a bool, got {renormalize!r}")
    scale32 = _check_scale(scale)
    if namespace(logits) is not np:
        scale32 = namespace(logits).tensor(float(scale32), dtype=logits.dtype, device=logits.device)
    return route_rows(logits, bias, scale32, bool(renormalize))


def route_rows(logits, bias, scale, renormalize):
    """``route`` without argument checks, on NumPy arrays or torch tensors (any device), for n rows at once,
    each with its own bias, scale and renormalize where those are given per row.

    logits float32 [n, 256]; bias float32 [256] or [n, 256] (one per row); scale float32 [] or [n];
    renormalize a bool or a bool array [n]. Returns (ids int32 [n, 8], weights float32 [n, 8]) of the
    library of ``logits``.
    """
    xp = namespace(logits)
    n = logits.shape[0]
    score = sigmoid_f32(logits)
    choice = add_rn(score, _broadcast(xp, bias, score.shape))
    taken = xp.zeros(choice.shape, dtype=xp.bool_ if xp is np else xp.bool, **_on(logits))
    rows = xp.arange(n, **_on(logits))
    picks = []
    for _ in range(TOP_K):
        best = _row_max(xp, xp.where(taken, -np.inf, choice))
        pick = _first_true(xp, (choice == best) & ~taken)
        picks.append(pick)
        taken[rows, pick] = True
    ids = _to_i32(xp, xp.stack(picks, 1))
    picked = _take_rows(xp, score, ids)
    scale = _broadcast(xp, scale, (n,))
    scaled = None if renormalize is True else mul_rn(picked, _broadcast(xp, scale[:, None], picked.shape))
    if renormalize is False:
        return ids, scaled
    total = xp.zeros(n, dtype=xp.float32, **_on(logits))
    for k in range(TOP_K):
        total = add_rn(total, picked[:, k])
    inverse = div_full_f32(scale, add_rn(total, _broadcast(xp, _like(xp, ROUTER_EPS, logits), total.shape)))
    renormalized = mul_rn(picked, _broadcast(xp, inverse[:, None], picked.shape))
    if renormalize is True:
        return ids, renormalized
    return ids, xp.where(renormalize[:, None], renormalized, scaled)


def _on(like):
    """Keyword arguments placing a new array beside ``like`` (torch's device; nothing for NumPy)."""
    return {} if isinstance(like, np.ndarray) else {"device": like.device}


def _like(xp, value, like):
    """NumPy scalar ``value`` as an array of ``like``'s library and device."""
    return np.asarray(value) if xp is np else xp.tensor(value.item(), dtype=xp.float32, device=like.device)


def _broadcast(xp, x, shape):
    return np.broadcast_to(x, shape) if xp is np else x.expand(shape)


def _row_max(xp, x):
    return x.max(axis=1, keepdims=True) if xp is np else x.amax(dim=1, keepdim=True)


def _first_true(xp, mask):
    """Index of the first True of each row (argmax returns the first of equal maxima in both libraries)."""
    return np.argmax(mask, axis=1) if xp is np else xp.argmax(mask.to(xp.uint8), dim=1)


def _to_i32(xp, x):
    return x.astype(np.int32) if xp is np else x.to(xp.int32)


def _take_rows(xp, x, index):
    """x[r, index[r, j]] for every row r and column j."""
    return np.take_along_axis(x, index.astype(np.intp), axis=1) if xp is np else xp.gather(x, 1, index.long())


def _cumsum_rows(xp, x):
    return np.cumsum(x, axis=1) if xp is np else xp.cumsum(x, dim=1)


def _histogram_rows(xp, index, bins):
    """int64 [n, bins]: how often each value 0 .. bins - 1 appears in each row of the int array ``index``."""
    if xp is np:
        n = index.shape[0]
        flat = (index + np.arange(n)[:, None] * bins).reshape(-1)
        return np.bincount(flat, minlength=n * bins).reshape(n, bins).astype(np.int64)
    ones = xp.ones(index.shape, dtype=xp.int64, device=index.device)
    return xp.zeros((index.shape[0], bins), dtype=xp.int64, device=index.device).scatter_add_(1, index.long(), ones)


def _count_at_most(xp, ascending, values):
    """int64 [n, m]: for each row r of ``ascending`` [n, k] (non-decreasing) and each of ``values`` [m], how
    many entries of the row are <= the value."""
    if xp is np:
        return (ascending[:, None, :] <= values[None, :, None]).sum(2)
    return xp.searchsorted(ascending, values.expand(ascending.shape[0], -1).contiguous(), right=True)


def _scatter_rows(xp, x, index, values):
    """x[r, index[r, j]] = values[r, j] for every row r and column j, in place."""
    if xp is np:
        np.put_along_axis(x, index.astype(np.intp), values, axis=1)
    else:
        x.scatter_(1, index.long(), values)


def _check_int(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise ValueError(f"{name} must be an int in [{low}, {high}], got {value!r}")
    return int(value)


def _check_ids(ids):
    """The array library of ``ids``; ValueError unless an int32 NumPy array or torch tensor [b, 8] of distinct
    experts per row."""
    xp = _library(ids)
    if xp is None or ids.dtype != xp.int32:
        raise ValueError(f"ids must be an int32 NumPy array or torch tensor [b, 8], got "
                         f"{getattr(ids, 'dtype', type(ids).__name__)}")
    if ids.ndim != 2 or ids.shape[1] != TOP_K or not 1 <= ids.shape[0] <= MAX_TOKENS:
        raise ValueError(f"ids must have shape [b, {TOP_K}] with 1 <= b <= {MAX_TOKENS}, got {tuple(ids.shape)}")
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= EXPERTS:
        raise ValueError(f"ids must lie in [0, {EXPERTS}), got {low}..{high}")
    ordered = np.sort(ids, axis=1) if xp is np else xp.sort(ids, dim=1).values
    if bool((ordered[:, 1:] == ordered[:, :-1]).any()):
        raise ValueError("ids must not repeat an expert within a token row")
    return xp


def routing_metadata(ids, local_expert_offset, num_local_experts, tile_n, fill=-(2**31)):
    """int32 [metadata_size(tile_n)]: the metadata of local experts [offset, offset + num) for GEMM tile tile_n.

    ids: int32 [b, 8] with 1 <= b <= 8 (the kernel's token limit, which the layout is sized for), each row
    distinct experts in [0, 256), a NumPy array or a torch tensor (the result is then a tensor on its device);
    0 <= offset, 0 <= num <= 256 - offset, 1 <= tile_n <= MAX_TILE; fill an int32.

    Semantics of FlashInfer's routingIndicesDynBlockKernel: per local expert e, count = its tokens, ctas =
    ceil(count / tile_n), first CTA = exclusive sum of ctas in expert order; CTA i of e gets batch index
    e - offset and row limit min((i + 1) * tile_n, first * tile_n + count); e's rows hold its token ids in
    token order, then -1 up to the end of its last CTA; route t * 8 + k maps to its row, or -1 when its
    expert is another rank's. Elements the kernel does not write (entries past 8b routes, past the CTA
    count and the padded rows, and the guard) keep ``fill``.
    """
    xp = _check_ids(ids)
    offset = _check_int("local_expert_offset", local_expert_offset, 0, EXPERTS)
    count_local = _check_int("num_local_experts", num_local_experts, 0, EXPERTS - offset)
    tile = _check_int("tile_n", tile_n, 1, MAX_TILE)
    fill = _check_int("fill", fill, _INT32_MIN, _INT32_MAX)
    ranges = [np.array([v]) if xp is np else xp.tensor([v], device=ids.device) for v in (offset, count_local)]
    return metadata_rows(ids[None], *ranges, tile, fill)[0]


def metadata_rows(ids, local_expert_offset, num_local_experts, tile_n, fill):
    """``routing_metadata`` without argument checks, for p problems at once, on NumPy arrays or torch tensors.

    ids int32 [p, b, 8]; local_expert_offset and num_local_experts integer arrays [p] of the same library and
    device; tile_n and fill ints. Returns int32 [p, metadata_size(tile_n)].
    """
    xp = namespace(ids)
    p, routes = ids.shape[0], ids.shape[1] * TOP_K
    ctas_max = xp.arange(MAX_CTAS, **_on(ids))
    expert_of_route = ids.reshape(p, routes)
    local = expert_of_route - local_expert_offset[:, None]
    is_local = (local >= 0) & (local < num_local_experts[:, None])
    # Tokens per local expert [p, 256]: the routes of other ranks count in a spare bin, dropped.
    counts = _histogram_rows(xp, xp.where(is_local, local, EXPERTS), EXPERTS + 1)[:, :EXPERTS]
    ctas = (counts + tile_n - 1) // tile_n
    cta_end = _cumsum_rows(xp, ctas)
    cta_first = cta_end - ctas
    total = cta_end[:, -1:]
    # A route's rank among the routes of its expert, in token order (each token holds an expert once).
    order = xp.arange(routes, **_on(ids))
    rank = ((expert_of_route[:, :, None] == expert_of_route[:, None, :]) & (order[None, :] < order[:, None])).sum(2)
    local_index = xp.where(is_local, local, 0)
    permuted = _take_rows(xp, cta_first, local_index) * tile_n + rank
    size = metadata_size(tile_n)
    # One spare column past the metadata takes the writes of routes that are not local (no host round trip
    # to find the local ones).
    out = xp.full((p, size + 1), fill, dtype=xp.int32, **_on(ids))
    out[:, META_PADDED_TOKENS] = _to_i32(xp, total[:, 0] * tile_n)
    out[:, META_NUM_CTAS] = _to_i32(xp, total[:, 0])
    out[:, META_EXPANDED_TO_PERMUTED:META_EXPANDED_TO_PERMUTED + routes] = _to_i32(xp, xp.where(is_local, permuted, -1))
    # CTA i belongs to the local expert whose CTAs start at or before i and end after it.
    expert_of_cta = _count_at_most(xp, cta_end, ctas_max)
    owner = xp.where(ctas_max < total, expert_of_cta, 0)
    limit = xp.minimum((ctas_max + 1) * tile_n,
                       _take_rows(xp, cta_first, owner) * tile_n + _take_rows(xp, counts, owner))
    cta_used = ctas_max < total
    out[:, META_CTA_BATCH:META_CTA_BATCH + MAX_CTAS] = _to_i32(xp, xp.where(cta_used, expert_of_cta, fill))
    out[:, META_CTA_LIMIT:META_CTA_LIMIT + MAX_CTAS] = _to_i32(xp, xp.where(cta_used, limit, fill))
    padded_rows = xp.arange(MAX_CTAS * tile_n, **_on(ids))
    out[:, META_PERMUTED_TO_TOKEN:META_PERMUTED_TO_TOKEN + MAX_CTAS * tile_n] = _to_i32(
        xp, xp.where(padded_rows < total * tile_n, -1, fill))
    token = xp.zeros(is_local.shape, dtype=xp.int32, **_on(ids)) + _to_i32(xp, order // TOP_K)
    _scatter_rows(xp, out, xp.where(is_local, META_PERMUTED_TO_TOKEN + permuted, size), token)
    return out[:, :size]
