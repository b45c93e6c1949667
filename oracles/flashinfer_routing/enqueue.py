"""FlashInfer's routingIndicesDynBlockKernel enqueued on torch device buffers and a CUDA stream, without
waiting: for timing and CUDA graph capture. ``dyn_block.dyn_block_metadata`` is the oracle entry (host ids,
poisoned buffers, synchronous copy back); this is the same launch through ``fi_dyn_block_enqueue``.

The library links the CUDA runtime statically; it launches into the current context of the calling thread
(torch's primary context), so a torch stream handle is valid there. Call once outside capture first: the
library's runtime initialises itself and loads the kernel on its first launch.
"""

import ctypes
from dataclasses import dataclass
from functools import lru_cache

import torch

from kernel.layout import (
    EXPERTS,
    MAX_CTAS,
    MAX_TILE,
    MAX_TOKENS,
    META_CTA_BATCH,
    META_CTA_LIMIT,
    META_EXPANDED_TO_PERMUTED,
    META_PADDED_TOKENS,
    META_PERMUTED_TO_TOKEN,
    ROUTES,
    TOP_K,
    metadata_size,
)
from oracles.flashinfer_routing.dyn_block import (
    _MESSAGE_CAPACITY,
    DEFAULT_POISON,
    DynBlockMetadata,
    FlashInferOracleError,
    _check_int,
    load_library,
)

SCALARS = 2  # permuted_idx_size, num_non_exiting_ctas


@dataclass(frozen=True)
class MetadataOutputs:
    """FlashInfer's routing metadata outputs on a device, the buffers its dyn-block kernel and its fused routing
    both write: int32, sized as the oracle entry's (ROUTES, MAX_CTAS, MAX_CTAS, MAX_CTAS * tile_n, SCALARS)."""

    expanded_to_permuted: torch.Tensor
    cta_batch: torch.Tensor
    cta_limit: torch.Tensor
    permuted_to_token: torch.Tensor
    scalars: torch.Tensor
    tile_n: int

    NAMES = ("expanded_to_permuted", "cta_batch", "cta_limit", "permuted_to_token", "scalars")

    @staticmethod
    def sizes(tile_n):
        return (ROUTES, MAX_CTAS, MAX_CTAS, MAX_CTAS * tile_n, SCALARS)

    @classmethod
    def allocate(cls, device, tile_n):
        """The outputs' tensors on ``device``, as keyword arguments of a MetadataOutputs (tile_n included)."""
        return {**{name: torch.empty(n, dtype=torch.int32, device=device)
                   for name, n in zip(cls.NAMES, cls.sizes(tile_n))}, "tile_n": tile_n}

    def outputs(self):
        return tuple(getattr(self, name) for name in self.NAMES)

    def poison_outputs(self, value):
        for out in self.outputs():
            out.fill_(value)

    def check_outputs(self, device):
        """Raise ValueError naming the first output that is no contiguous int32 tensor of its size on ``device``."""
        for name, out, size in zip(self.NAMES, self.outputs(), self.sizes(self.tile_n)):
            if not isinstance(out, torch.Tensor) or out.dtype != torch.int32 or out.dim() != 1 \
                    or out.numel() != size or not out.is_contiguous() or out.device != device:
                raise ValueError(f"buffers.{name} must be a contiguous int32 tensor of {size} elements on {device}")

    def read_metadata(self, poison):
        """The outputs as a DynBlockMetadata (copies to the host; synchronizes)."""
        e2p, batch, limit, p2t, scalars = (out.cpu().numpy() for out in self.outputs())
        return DynBlockMetadata(batch, limit, p2t, e2p, int(scalars[0]), int(scalars[1]), self.tile_n, poison)


@dataclass(frozen=True)
class DeviceBuffers(MetadataOutputs):
    """The dyn-block kernel's device tensors of one launch: the metadata outputs and the ids it reads
    (int32 [b, 8])."""

    ids: torch.Tensor

    def poison(self, value=DEFAULT_POISON):
        self.poison_outputs(value)


def device_buffers(ids, tile_n, poison=DEFAULT_POISON):
    """DeviceBuffers reading ``ids`` (int32 [b, 8] on a CUDA device) with outputs on its device, poisoned."""
    _check_ids_tensor(ids)
    tile = _check_int("tile_n", tile_n, 1, MAX_TILE)
    buffers = DeviceBuffers(ids=ids, **MetadataOutputs.allocate(ids.device, tile))
    buffers.poison(poison)
    return buffers


def buffers_in_meta(ids, meta, tile_n):
    """DeviceBuffers reading ``ids`` whose outputs are the slots of ``meta`` (int32 [metadata_size(tile_n)] on
    ids' device) where ``dyn_block.place_in_meta`` lays them: the kernel writes the metadata layout itself
    (one launch, no copies), every element it does not write keeping what ``meta`` held."""
    _check_ids_tensor(ids)
    tile = _check_int("tile_n", tile_n, 1, MAX_TILE)
    if not isinstance(meta, torch.Tensor) or meta.dtype != torch.int32 or meta.dim() != 1 \
            or meta.numel() != metadata_size(tile) or not meta.is_contiguous():
        raise ValueError(f"meta must be a contiguous int32 tensor of metadata_size({tile}) = {metadata_size(tile)} "
                         f"elements, got {getattr(meta, 'dtype', type(meta).__name__)} {list(getattr(meta, 'shape', []))}")
    slot = lambda start, size: meta[start:start + size]  # noqa: E731
    return DeviceBuffers(ids=ids, tile_n=tile, expanded_to_permuted=slot(META_EXPANDED_TO_PERMUTED, ROUTES),
                         cta_batch=slot(META_CTA_BATCH, MAX_CTAS), cta_limit=slot(META_CTA_LIMIT, MAX_CTAS),
                         permuted_to_token=slot(META_PERMUTED_TO_TOKEN, MAX_CTAS * tile),
                         scalars=slot(META_PADDED_TOKENS, SCALARS))


@lru_cache(maxsize=None)
def _entry():
    entry = load_library().fi_dyn_block_enqueue
    entry.restype = ctypes.c_int
    entry.argtypes = [ctypes.c_void_p, *[ctypes.c_int32] * 6, *[ctypes.c_void_p] * 6, ctypes.c_int32,
                      ctypes.c_char_p, ctypes.c_int32]
    return entry


def _check_ids_tensor(ids):
    if not isinstance(ids, torch.Tensor) or ids.dtype != torch.int32 or ids.dim() != 2 \
            or ids.shape[1] != TOP_K or not 1 <= ids.shape[0] <= MAX_TOKENS:
        raise ValueError(f"ids must be an int32 torch.Tensor [b, {TOP_K}] with 1 <= b <= {MAX_TOKENS}, got "
                         f"{getattr(ids, 'dtype', type(ids).__name__)} {list(getattr(ids, 'shape', []))}")
    if ids.device.type != "cuda" or not ids.is_contiguous():
        raise ValueError(f"ids must be a contiguous tensor on a CUDA device, got {ids.device}")


def _check_buffers(buffers):
    if not isinstance(buffers, DeviceBuffers):
        raise ValueError(f"buffers must be a DeviceBuffers (see device_buffers), got {type(buffers).__name__}")
    _check_ids_tensor(buffers.ids)
    buffers.check_outputs(buffers.ids.device)
    if buffers.ids.device.index != torch.cuda.current_device():
        raise ValueError(f"buffers must be on the current CUDA device (cuda:{torch.cuda.current_device()}), "
                         f"got {buffers.ids.device}")


def enqueue(buffers, local_expert_offset, num_local_experts, use_pdl=False, stream=None):
    """Launch the dyn-block kernel for ``buffers`` on ``stream`` (a torch.cuda.Stream; default: the current
    stream) without waiting; ``use_pdl`` allows programmatic dependent launch (FlashInfer's mUsePdl).
    Raises ValueError on bad arguments (before anything is launched), FlashInferOracleError when the
    library reports a launch error or launched nothing."""
    _check_buffers(buffers)
    offset = _check_int("local_expert_offset", local_expert_offset, 0, EXPERTS)
    num_local = _check_int("num_local_experts", num_local_experts, 0, EXPERTS - offset)
    if not isinstance(use_pdl, bool):
        raise ValueError(f"use_pdl must be a bool, got {use_pdl!r}")
    stream = torch.cuda.current_stream() if stream is None else stream
    message = ctypes.create_string_buffer(_MESSAGE_CAPACITY)
    status = _entry()(buffers.ids.data_ptr(), buffers.ids.shape[0], EXPERTS, TOP_K, offset, num_local,
                      buffers.tile_n, *(out.data_ptr() for out in buffers.outputs()), stream.cuda_stream,
                      int(use_pdl), message, _MESSAGE_CAPACITY)
    if status != 0:
        raise FlashInferOracleError(f"FlashInfer enqueue failed (status {status}): "
                                    f"{message.value.decode(errors='replace')}")


def read_back(buffers, poison=DEFAULT_POISON):
    """The buffers' contents as a DynBlockMetadata (copies to the host; synchronizes)."""
    _check_buffers(buffers)
    return buffers.read_metadata(poison)
