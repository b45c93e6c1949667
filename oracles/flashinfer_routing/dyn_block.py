"""FlashInfer's routingIndicesDynBlockKernel run on given expert ids, and its outputs in the kernel's META layout.

The library (``build.py``) fills every output buffer with a poison value on the device before the launch
and copies each back whole, so elements FlashInfer does not write keep the poison and are compared too.
"""

import ctypes
from dataclasses import dataclass
from functools import lru_cache

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
    ROUTES,
    TOP_K,
    metadata_size,
)
from oracles.flashinfer_routing import build

_INT32_MIN = -(2**31)
# Every value FlashInfer writes is >= -1, so a poison below -1 tells unwritten elements apart.
DEFAULT_POISON = -0x5A5A5A5B
# A NaN no float operation produces (the H200 writes every NaN it computes as 0x7FFFFFFF): weights' poison.
WEIGHT_POISON_BITS = 0x7FBADBAD
_MESSAGE_CAPACITY = 1024
_I32P = ctypes.POINTER(ctypes.c_int32)


class FlashInferOracleError(RuntimeError):
    """FlashInfer's kernel did not run to completion: a CUDA error, or nothing was launched."""


@dataclass(frozen=True)
class DynBlockMetadata:
    """FlashInfer's outputs for one call; elements it did not write hold ``poison``.

    cta_batch, cta_limit: int32 [MAX_CTAS]; permuted_to_token: int32 [MAX_CTAS * tile_n];
    expanded_to_permuted: int32 [ROUTES] (only the first 8b exist for b tokens).
    """

    cta_batch: np.ndarray
    cta_limit: np.ndarray
    permuted_to_token: np.ndarray
    expanded_to_permuted: np.ndarray
    padded_tokens: int
    num_ctas: int
    tile_n: int
    poison: int


def _check_int(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise ValueError(f"{name} must be an int in [{low}, {high}], got {value!r}")
    return int(value)


def _check_ids(ids):
    """ids: int32 [b, TOP_K], 1 <= b <= MAX_TOKENS, each in [0, EXPERTS), no expert twice in a row."""
    if not isinstance(ids, np.ndarray) or ids.dtype != np.int32 or ids.ndim != 2 \
            or ids.shape[1] != TOP_K or not 1 <= ids.shape[0] <= MAX_TOKENS:
        got = f"{type(ids).__name__} {getattr(ids, 'dtype', '')} {getattr(ids, 'shape', '')}"
        raise ValueError(f"ids must be an int32 numpy array of shape [b, {TOP_K}] with 1 <= b <= "
                         f"{MAX_TOKENS}, got {got}")
    if ids.min() < 0 or ids.max() >= EXPERTS:
        raise ValueError(f"ids must lie in [0, {EXPERTS}), got values in [{ids.min()}, {ids.max()}]")
    ordered = np.sort(ids, axis=1)
    twice = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
    if twice.size:
        raise ValueError(f"ids must not repeat an expert within a token (a duplicate is a race inside "
                         f"FlashInfer's kernel); token {twice[0]} repeats one: {ids[twice[0]].tolist()}")
    return np.ascontiguousarray(ids)


@lru_cache(maxsize=None)
def load_library():
    """The built library (``make flashinfer-oracle``); built now when absent."""
    path = build.LIBRARY if build.LIBRARY.is_file() else build.build()
    library = ctypes.CDLL(str(path))
    entry = library.fi_dyn_block_metadata
    entry.restype = ctypes.c_int
    entry.argtypes = [_I32P, *[ctypes.c_int32] * 7, _I32P, ctypes.c_int32, _I32P, _I32P, ctypes.c_int32,
                      _I32P, ctypes.c_int32, _I32P, ctypes.c_char_p, ctypes.c_int32]
    return library


def _ptr(array):
    return array.ctypes.data_as(_I32P)


def dyn_block_metadata(ids, local_expert_offset, num_local_experts, tile_n, poison=DEFAULT_POISON):
    """FlashInfer's routingIndicesDynBlockKernel metadata for ids int32 [b, 8] (a DynBlockMetadata).

    Local experts are [local_expert_offset, local_expert_offset + num_local_experts), tile_n the GEMM tile.
    Raises ValueError on bad arguments (before anything runs), FlashInferOracleError when the kernel did
    not run: a CUDA error, a dispatch that launched nothing, or a size FlashInfer always writes still poison.
    """
    ids = _check_ids(ids)
    offset = _check_int("local_expert_offset", local_expert_offset, 0, EXPERTS)
    num_local = _check_int("num_local_experts", num_local_experts, 0, EXPERTS - offset)
    tile = _check_int("tile_n", tile_n, 1, MAX_TILE)
    poison = _check_int("poison", poison, _INT32_MIN, -2)
    expanded = np.empty(ROUTES, np.int32)
    cta_batch = np.empty(MAX_CTAS, np.int32)
    cta_limit = np.empty(MAX_CTAS, np.int32)
    permuted = np.empty(MAX_CTAS * tile, np.int32)
    scalars = np.empty(2, np.int32)
    message = ctypes.create_string_buffer(_MESSAGE_CAPACITY)
    status = load_library().fi_dyn_block_metadata(
        _ptr(ids), ids.shape[0], EXPERTS, TOP_K, offset, num_local, tile, poison,
        _ptr(expanded), expanded.size, _ptr(cta_batch), _ptr(cta_limit), MAX_CTAS, _ptr(permuted),
        permuted.size, _ptr(scalars), message, _MESSAGE_CAPACITY)
    if status != 0:
        raise FlashInferOracleError(f"FlashInfer oracle failed (status {status}): "
                                    f"{message.value.decode(errors='replace')}")
    if poison in scalars:
        raise FlashInferOracleError(f"FlashInfer's kernel left its sizes unwritten ({scalars.tolist()}): "
                                    "it did not run")
    return DynBlockMetadata(cta_batch, cta_limit, permuted, expanded, int(scalars[0]), int(scalars[1]),
                            tile, poison)


def place_in_meta(meta, padded_tokens, num_ctas, expanded_to_permuted, cta_batch, cta_limit, permuted_to_token,
                  tile_n):
    """Write FlashInfer's outputs into ``meta`` (last axis: the kernel's META layout of ``tile_n``) in place.
    NumPy arrays or torch tensors, batched along leading axes alike (one FlashInfer call per leading index)."""
    meta[..., META_PADDED_TOKENS] = padded_tokens
    meta[..., META_NUM_CTAS] = num_ctas
    meta[..., META_EXPANDED_TO_PERMUTED:META_EXPANDED_TO_PERMUTED + ROUTES] = expanded_to_permuted
    meta[..., META_CTA_BATCH:META_CTA_BATCH + MAX_CTAS] = cta_batch
    meta[..., META_CTA_LIMIT:META_CTA_LIMIT + MAX_CTAS] = cta_limit
    meta[..., META_PERMUTED_TO_TOKEN:META_PERMUTED_TO_TOKEN + MAX_CTAS * tile_n] = permuted_to_token
    return meta


def to_meta(metadata: DynBlockMetadata) -> np.ndarray:
    """int32 [metadata_size(tile_n)]: FlashInfer's outputs in the kernel's META layout.

    Elements FlashInfer has no buffer for (the alignment gap and the guard) hold ``metadata.poison``, as do
    the elements it did not write, so the vector compares whole with a model or kernel filled likewise.
    """
    m = metadata
    meta = np.full(metadata_size(m.tile_n), m.poison, np.int32)
    return place_in_meta(meta, m.padded_tokens, m.num_ctas, m.expanded_to_permuted, m.cta_batch, m.cta_limit,
                         m.permuted_to_token, m.tile_n)
