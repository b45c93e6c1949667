"""FlashInfer's fused routing from logits, the peer a user would pick instead of the CuTe kernel: its
routingCustom::run as its routing runner calls it for DeepSeekV3 routing with one expert group (sigmoid +
bias selects the top 8 of 256, the un-biased sigmoids renormalized and scaled, metadata included), enqueued
on torch device buffers and a CUDA stream without waiting, for timing and CUDA graph capture.

``fused_peer.cu`` says what runs and where it differs from the runner (FP32 weights; ids through its
routing-replay output, int16). For b <= 4 tokens FlashInfer launches routingIndicesBlockKernel, for 5..16
routingIndicesDynBlockKernel: ``enqueue`` returns the name of the kernel it launched. As for the oracle's
``enqueue``: the library launches into the calling thread's current context (torch's primary context);
call once outside capture first.
"""

import ctypes
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS, TOP_K
from oracles.flashinfer_routing import build
from oracles.flashinfer_routing.dyn_block import (
    _MESSAGE_CAPACITY,
    DEFAULT_POISON,
    WEIGHT_POISON_BITS,
    DynBlockMetadata,
    FlashInferOracleError,
    _check_int,
)
from oracles.flashinfer_routing.enqueue import MetadataOutputs

# FlashInfer's BlockKernelMaxNumTokens: up to this many tokens run() launches the static block kernel.
BLOCK_KERNEL_MAX_TOKENS = 4
KERNELS = {1: "routingIndicesBlockKernel", 2: "routingIndicesDynBlockKernel"}
# The runner's expert-count histogram: max(2 * experts, 512) int32 (scratch on this path).
EXPERT_COUNTS = max(2 * EXPERTS, 512)
# Ids are int16 (the routing-replay output): a poison no expert id takes.
IDS_POISON = -0x5A5B


def expected_kernel(b):
    """The kernel FlashInfer's routingCustom::run launches for ``b`` tokens, 256 experts, top 8."""
    return KERNELS[1] if b <= BLOCK_KERNEL_MAX_TOKENS else KERNELS[2]


@dataclass(frozen=True)
class PeerBuffers(MetadataOutputs):
    """Device tensors of one launch: the metadata outputs, the inputs it reads (FP32 logits [b, 256], bias
    [256]), its other outputs (FP32 weights, int16 ids [b, 8]) and the runner's scratch (top-K packed [b, 8],
    expert counts)."""

    logits: torch.Tensor
    bias: torch.Tensor
    weights: torch.Tensor
    ids: torch.Tensor
    topk_packed: torch.Tensor
    expert_counts: torch.Tensor

    def poison(self, value=DEFAULT_POISON):
        """Poison every output: metadata with ``value``, ids with IDS_POISON, weights with a NaN pattern."""
        self.poison_outputs(value)
        self.ids.fill_(IDS_POISON)
        self.weights.view(torch.int32).fill_(WEIGHT_POISON_BITS)


@dataclass(frozen=True)
class PeerOutputs:
    """One launch's outputs on the host: ids int32 [b, 8] (widened from int16), weights float32 [b, 8], and
    the metadata as the oracle's DynBlockMetadata."""

    ids: np.ndarray
    weights: np.ndarray
    metadata: DynBlockMetadata


def _check_float_tensor(name, tensor, shape, device=None):
    if not isinstance(tensor, torch.Tensor) or tensor.dtype != torch.float32 or tuple(tensor.shape) != shape:
        raise ValueError(f"{name} must be a float32 torch.Tensor of shape {list(shape)}, got "
                         f"{getattr(tensor, 'dtype', type(tensor).__name__)} {list(getattr(tensor, 'shape', []))}")
    if tensor.device.type != "cuda" or not tensor.is_contiguous() or (device is not None and tensor.device != device):
        raise ValueError(f"{name} must be a contiguous tensor on {device or 'a CUDA device'}, got {tensor.device}")


def _check_logits(logits):
    b = logits.shape[0] if isinstance(logits, torch.Tensor) and logits.dim() == 2 else None
    if b is None or not 1 <= b <= MAX_TOKENS:
        raise ValueError(f"logits must be a float32 torch.Tensor [b, {EXPERTS}] with 1 <= b <= {MAX_TOKENS}, got "
                         f"{getattr(logits, 'dtype', type(logits).__name__)} {list(getattr(logits, 'shape', []))}")
    _check_float_tensor("logits", logits, (b, EXPERTS))
    return b


def _check_tile(tile_n):
    tile = _check_int("tile_n", tile_n, 1, MAX_TILE)
    if tile & (tile - 1):
        raise ValueError(f"tile_n must be a power of two (FlashInfer's routing runner requires it), got {tile}")
    return tile


def peer_buffers(logits, bias, tile_n, poison=DEFAULT_POISON):
    """PeerBuffers reading ``logits`` (float32 [b, 256]) and ``bias`` (float32 [256]) on one CUDA device, with
    outputs and scratch on that device, poisoned."""
    b = _check_logits(logits)
    _check_float_tensor("bias", bias, (EXPERTS,), logits.device)
    tile = _check_tile(tile_n)
    new = lambda n, dtype=torch.int32: torch.empty(n, dtype=dtype, device=logits.device)  # noqa: E731
    buffers = PeerBuffers(logits=logits, bias=bias, weights=new((b, TOP_K), torch.float32),
                          ids=new((b, TOP_K), torch.int16), topk_packed=new((b, TOP_K)),
                          expert_counts=new(EXPERT_COUNTS), **MetadataOutputs.allocate(logits.device, tile))
    buffers.poison(_check_int("poison", poison, -(2**31), -2))
    return buffers


def _check_buffers(buffers):
    if not isinstance(buffers, PeerBuffers):
        raise ValueError(f"buffers must be a PeerBuffers (see peer_buffers), got {type(buffers).__name__}")
    b = _check_logits(buffers.logits)
    device = buffers.logits.device
    _check_float_tensor("buffers.bias", buffers.bias, (EXPERTS,), device)
    _check_float_tensor("buffers.weights", buffers.weights, (b, TOP_K), device)
    _check_tile(buffers.tile_n)
    ints = (("ids", (b, TOP_K), torch.int16), ("topk_packed", (b, TOP_K), torch.int32),
            ("expert_counts", (EXPERT_COUNTS,), torch.int32))
    for name, shape, dtype in ints:
        out = getattr(buffers, name)
        if not isinstance(out, torch.Tensor) or out.dtype != dtype or tuple(out.shape) != shape \
                or not out.is_contiguous() or out.device != device:
            raise ValueError(f"buffers.{name} must be a contiguous {dtype} tensor of shape {list(shape)} on {device}")
    buffers.check_outputs(device)
    if device.index != torch.cuda.current_device():
        raise ValueError(f"buffers must be on the current CUDA device (cuda:{torch.cuda.current_device()}), "
                         f"got {device}")
    return b


def _check_scale(scale):
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating, np.integer)) \
            or not math.isfinite(scale):
        raise ValueError(f"scale must be a finite float, got {scale!r}")
    return float(np.float32(scale))


@lru_cache(maxsize=None)
def load_library():
    """The peer's library (``make flashinfer-oracle``); built now when absent."""
    path = build.FUSED_LIBRARY if build.FUSED_LIBRARY.is_file() else build.build(library=build.FUSED_PEER)
    library = ctypes.CDLL(str(path))
    entry = library.fi_fused_routing_enqueue
    entry.restype = ctypes.c_int
    entry.argtypes = [ctypes.c_void_p, ctypes.c_void_p, *[ctypes.c_int32] * 3, ctypes.c_float,
                      *[ctypes.c_int32] * 3, *[ctypes.c_void_p] * 9, ctypes.c_void_p, ctypes.c_int32,
                      ctypes.POINTER(ctypes.c_int32), ctypes.c_char_p, ctypes.c_int32]
    return library


def enqueue(buffers, scale, local_expert_offset, num_local_experts, use_pdl=True, stream=None):
    """Run FlashInfer's routingCustom::run for ``buffers`` on ``stream`` (a torch.cuda.Stream; default: the
    current stream) without waiting: routed scaling factor ``scale``, local experts [local_expert_offset,
    local_expert_offset + num_local_experts), ``use_pdl`` its mUsePdl. Returns the name of the kernel it
    launched. Raises ValueError on bad arguments (before anything is launched), FlashInferOracleError when
    the library reports an error or FlashInfer's dispatch took a path this library does not hold."""
    b = _check_buffers(buffers)
    scale = _check_scale(scale)
    offset = _check_int("local_expert_offset", local_expert_offset, 0, EXPERTS - 1)
    num_local = _check_int("num_local_experts", num_local_experts, 1, EXPERTS - offset)
    if not isinstance(use_pdl, bool):
        raise ValueError(f"use_pdl must be a bool, got {use_pdl!r}")
    stream = torch.cuda.current_stream() if stream is None else stream
    message = ctypes.create_string_buffer(_MESSAGE_CAPACITY)
    kernel = ctypes.c_int32(0)
    pointers = (buffers.weights, buffers.ids, buffers.topk_packed, buffers.expert_counts, *buffers.outputs())
    status = load_library().fi_fused_routing_enqueue(
        buffers.logits.data_ptr(), buffers.bias.data_ptr(), b, EXPERTS, TOP_K, scale, offset, num_local,
        buffers.tile_n, *(t.data_ptr() for t in pointers), stream.cuda_stream, int(use_pdl), ctypes.byref(kernel),
        message, _MESSAGE_CAPACITY)
    if status != 0:
        raise FlashInferOracleError(f"FlashInfer fused routing failed (status {status}): "
                                    f"{message.value.decode(errors='replace')}")
    return KERNELS[kernel.value]


def read_back(buffers, poison=DEFAULT_POISON):
    """The buffers' outputs as PeerOutputs (copies to the host; synchronizes)."""
    _check_buffers(buffers)
    return PeerOutputs(buffers.ids.cpu().numpy().astype(np.int32), buffers.weights.cpu().numpy(),
                       buffers.read_metadata(poison))
