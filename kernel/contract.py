"""route's host contract: the argument checks, and the cache of call signatures that passed them.

``check_arguments`` raises ValueError naming the first argument outside route's contract, before anything is
written. A call whose signature (each tensor's address, shape, strides, dtype and device; every scalar with
its type) equals one that passed is valid too, since the checks read nothing else: ``CheckedCalls`` keeps
those signatures so a repeated call skips the checks. ``check_abstract`` runs the same checks on tensors without
memory (the fake tensors torch.compile traces with), but those that read addresses. The device facts the checks
hold arguments to (the row granule, the alignment) are kernel/layout.py's.
"""

import contextvars
import math
import numbers

import numpy as np
import torch

from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS, TENSOR_ALIGN, TOP_K, VECTOR_WORDS, metadata_size

CACHE_LIMIT = 4096  # signatures kept; the cache starts afresh when full
_abstract = contextvars.ContextVar("abstract", default=False)  # True while check_abstract runs


def _fail(name, message):
    raise ValueError(f"route: {name} {message}")


def _check_dense(name, t):
    """A strided tensor: a sparse or nested one has no one address and strides to read."""
    if t.is_nested or t.layout != torch.strided:
        _fail(name, f"must be a dense tensor (torch.strided layout), got "
                    f"{'a nested tensor' if t.is_nested else t.layout}")


def _check_tensor(name, t, dtype, shape):
    if not isinstance(t, torch.Tensor):
        _fail(name, f"must be a torch.Tensor, got {type(t).__name__}")
    _check_dense(name, t)
    if t.dtype != dtype:
        _fail(name, f"must have dtype {dtype}, got {t.dtype}")
    if tuple(t.shape) != shape:
        _fail(name, f"must have shape {list(shape)}, got {list(t.shape)}")


def _check_aligned(name, t, align):
    if not _abstract.get() and t.data_ptr() % align:
        _fail(name, f"must be {align}-byte aligned, got address {t.data_ptr():#x}")


def _check_contiguous(name, t, align):
    if not t.is_contiguous():
        _fail(name, f"must be contiguous, got strides {t.stride()}")
    _check_aligned(name, t, align)


def _span(t):
    """The byte range [start, end) a strided tensor touches."""
    start = t.data_ptr()
    last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return start, start + (last + 1) * t.element_size()


def _check_no_overlap(outputs, inputs):
    """No output may overlap another output or an input on the same device (each span computed once); tensors
    without memory have no spans."""
    if _abstract.get():
        return
    spans = {name: (t.device, *_span(t)) for name, t in {**outputs, **inputs}.items()}
    names = list(outputs)
    for i, name in enumerate(names):
        device, a0, a1 = spans[name]
        for other in names[i + 1:] + list(inputs):
            other_device, b0, b1 = spans[other]
            if device == other_device and a0 < b1 and b0 < a1:
                _fail(name, f"must not alias {other}")


def _check_int(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= value <= high:
        _fail(name, f"must be an int in [{low}, {high}], got {value!r}")


def _check_scale(scale):
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        _fail("scale", f"must be a real number, got {scale!r}")
    try:
        with np.errstate(over="ignore"):
            finite = bool(np.isfinite(np.float32(scale)))
    except OverflowError:  # an int beyond any float
        finite = False
    if not finite:
        _fail("scale", f"must be finite in float32, got {scale!r}")


def _check_devices(tensors):
    """Every tensor on the logits' CUDA device (the first of ``tensors``)."""
    device = tensors["logits"].device
    if device.type != "cuda":
        _fail("logits", f"must be on a CUDA device, got {device}")
    for name, t in tensors.items():
        if t.device != device:
            _fail(name, f"must be on the logits' device {device}, got {t.device}")


def _check_metadata(metadata, local_expert_offset, num_local_experts, tile_n):
    if metadata is None:
        for name, value in (("local_expert_offset", local_expert_offset),
                            ("num_local_experts", num_local_experts), ("tile_n", tile_n)):
            if isinstance(value, bool) or value != 0:
                _fail(name, f"is only meaningful with metadata; must be 0 without it, got {value!r}")
        return
    _check_int("tile_n", tile_n, 1, MAX_TILE)
    _check_int("local_expert_offset", local_expert_offset, 0, EXPERTS)
    # int(): EXPERTS - a NumPy uint8 or int8 offset would overflow in the offset's own type
    _check_int("num_local_experts", num_local_experts, 0, EXPERTS - int(local_expert_offset))
    if not isinstance(metadata, torch.Tensor) or metadata.dim() != 1:
        _fail("metadata", "must be a 1-D torch.Tensor")
    _check_tensor("metadata", metadata, torch.int32, tuple(metadata.shape))
    _check_contiguous("metadata", metadata, TENSOR_ALIGN)
    size = metadata_size(int(tile_n))  # a NumPy int is an int here too: layout's takes Python ints only
    if metadata.numel() < size:
        _fail("metadata", f"must hold at least metadata_size({tile_n}) = {size} elements, got {metadata.numel()}")


def check_arguments(logits, bias, ids, weights, scale, renormalize, metadata, local_expert_offset,
                     num_local_experts, tile_n):
    """Raise ValueError naming the first argument outside route's contract, in this order: logits, bias,
    ids, weights, scale, renormalize; the metadata request (without metadata its three scalars must be 0;
    with it tile_n, local_expert_offset, num_local_experts, then the metadata tensor); the outputs' overlaps
    (metadata, ids, weights, each against later outputs and the inputs); the devices last."""
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2:
        _fail("logits", f"must be a 2-D torch.Tensor [b, {EXPERTS}]")
    _check_dense("logits", logits)
    b = logits.shape[0]
    if not 1 <= b <= MAX_TOKENS:
        _fail("logits", f"must have 1 to {MAX_TOKENS} rows, got {b}")
    _check_tensor("logits", logits, torch.float32, (b, EXPERTS))
    if logits.stride(1) != 1 or logits.stride(0) % VECTOR_WORDS:
        _fail("logits", f"must have unit column stride and a row stride that is a multiple of {VECTOR_WORDS} "
                        f"(16-byte rows), got strides {logits.stride()}")
    _check_aligned("logits", logits, TENSOR_ALIGN)
    _check_tensor("bias", bias, torch.float32, (EXPERTS,))
    _check_contiguous("bias", bias, TENSOR_ALIGN)
    _check_tensor("ids", ids, torch.int32, (b, TOP_K))
    _check_contiguous("ids", ids, ids.element_size())
    _check_tensor("weights", weights, torch.float32, (b, TOP_K))
    _check_contiguous("weights", weights, weights.element_size())
    _check_scale(scale)
    if not isinstance(renormalize, bool):
        _fail("renormalize", f"must be a bool, got {renormalize!r}")
    _check_metadata(metadata, local_expert_offset, num_local_experts, tile_n)
    outputs = {"ids": ids, "weights": weights} if metadata is None else \
        {"metadata": metadata, "ids": ids, "weights": weights}
    inputs = {"logits": logits, "bias": bias}
    _check_no_overlap(outputs, inputs)
    _check_devices({**inputs, **outputs})


def check_abstract(logits, bias, ids, weights, scale, renormalize, metadata, local_expert_offset, num_local_experts,
                   tile_n):
    """``check_arguments`` on tensors without memory (fake tensors: the torch op's fake implementation): the same
    checks, order and ValueError, but those that read addresses (the alignments, the overlaps)."""
    token = _abstract.set(True)
    try:
        check_arguments(logits, bias, ids, weights, scale, renormalize, metadata, local_expert_offset,
                        num_local_experts, tile_n)
    finally:
        _abstract.reset(token)


def signature(logits, bias, ids, weights, scale, renormalize, metadata, local_expert_offset, num_local_experts,
              tile_n):
    """What ``check_arguments`` reads of a call, as one flat hashable tuple; None when an argument lacks what
    a tensor or a real scale has. Each tensor's type is part of it, so no other object matches a tensor that
    passed, and -0.0's sign tells it apart from 0.0. One expression: this runs on every call."""
    try:
        key = (type(scale), scale, math.copysign(1.0, scale), type(renormalize), renormalize,
               type(local_expert_offset), local_expert_offset, type(num_local_experts), num_local_experts,
               type(tile_n), tile_n,
               type(logits), logits.data_ptr(), logits.shape, logits.stride(), logits.dtype, logits.device,
               type(bias), bias.data_ptr(), bias.shape, bias.stride(), bias.dtype, bias.device,
               type(ids), ids.data_ptr(), ids.shape, ids.stride(), ids.dtype, ids.device,
               type(weights), weights.data_ptr(), weights.shape, weights.stride(), weights.dtype, weights.device)
        if metadata is None:
            return key
        return key + (type(metadata), metadata.data_ptr(), metadata.shape, metadata.stride(), metadata.dtype,
                      metadata.device)
    except (AttributeError, TypeError, ValueError, OverflowError, RuntimeError):  # no tensor, no real scale
        return None


class CheckedCalls:
    """Signatures of calls that passed ``check_arguments`` (and launched), each with its launch data; the last
    one found is compared first, so a repeated call costs one comparison and no hash of its key."""

    def __init__(self):
        self._entries = {}
        self._last_key = self._last_value = None  # None, never added, finds nothing

    def get(self, key):
        try:
            if key == self._last_key:
                return self._last_value
            value = self._entries.get(key)
        except TypeError:  # an unhashable scalar
            return None
        if value is not None:
            self._last_key, self._last_value = key, value
        return value

    def add(self, key, value):
        if key is None:
            return
        if len(self._entries) >= CACHE_LIMIT:
            self._entries.clear()
        try:
            self._entries[key] = value
        except TypeError:
            pass

