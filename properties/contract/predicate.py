"""route's contract stated on its own: for any call, whether it is valid and, if not, the argument the
ValueError must name first and the clause it breaks.

Written from ``kernel.routing.route``'s docstring and the contract's text, not from kernel/contract.py (it
imports of the kernel only kernel/layout.py's shapes). The clauses, in the order they are checked (each
argument's own clauses first, then the outputs' overlaps, the devices last):

Every tensor is dense: strided, not sparse, not nested (checked right after it is found to be a tensor).

- logits: a torch.Tensor of 2 dimensions; dense; 1 to MAX_TOKENS rows (b); float32; shape [b, EXPERTS]; unit column
  stride and a row stride that is a multiple of ROW_GRANULE elements (16-byte rows; 0, an expanded row, is one);
  its address a multiple of 16 bytes.
- bias: a torch.Tensor; float32; shape [EXPERTS]; contiguous; 16-byte aligned.
- ids, weights: torch.Tensors; int32 and float32; shape [b, TOP_K]; contiguous; aligned to their element.
- scale: a real number, not a bool, finite once rounded to float32.
- renormalize: a bool.
- without metadata: local_expert_offset, num_local_experts and tile_n (in that order) each equal to 0, not a bool.
- with metadata: tile_n an int in [1, MAX_TILE]; local_expert_offset an int in [0, EXPERTS]; num_local_experts
  an int in [0, EXPERTS - local_expert_offset]; metadata a 1-D torch.Tensor, int32, contiguous, 16-byte
  aligned, of at least metadata_size(tile_n) elements.
- overlap: no output (metadata, ids, weights, in that order) shares a byte of its span (first to one past the
  last byte its elements reach) with a later output or an input (logits, bias) on the same device (another
  device's addresses are another memory); the one named is the earlier.
- devices: logits on a CUDA device, then bias, metadata, ids, weights on the logits' device.

Route's torch op on tensors without memory (the fake tensors torch.compile traces with) holds every clause but
the two that read addresses, alignment and overlap (``judge(..., addresses=False)``).

"An int" is a numbers.Integral that is not a bool; "contiguous" is row-major dense, the stride of a
dimension of size 1 being free, an empty tensor always contiguous.
"""

import math
import numbers
from dataclasses import dataclass

import torch

from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS, TOP_K, metadata_size

ROW_GRANULE = 4  # elements: 16-byte logits rows
ALIGN = {"logits": 16, "bias": 16, "metadata": 16, "ids": 4, "weights": 4}  # bytes
# The smallest magnitude that rounds to infinity in float32 (round to nearest even): FLT_MAX plus half its ulp.
F32_OVERFLOW = 2.0 ** 128 - 2.0 ** 103
TENSORS = ("logits", "bias", "metadata", "ids", "weights")  # the devices' order
OUTPUTS = ("metadata", "ids", "weights")  # the overlaps' order
METADATA_SCALARS = ("local_expert_offset", "num_local_experts", "tile_n")
DEVICE = "device"  # the clause of a device refusal


@dataclass(frozen=True)
class Facts:
    """All the predicate reads of a tensor (``READS`` names them): the cache of checked calls must key on each."""

    type: type
    address: int  # data_ptr(): the storage offset is in it
    shape: tuple
    strides: tuple
    dtype: torch.dtype
    device: torch.device
    element_size: int


READS = tuple(Facts.__dataclass_fields__)
SCALAR_READS = ("type", "value", "sign of zero")  # the sign of a zero scale is the sign of the weights


def facts(t):
    """The Facts of tensor ``t``."""
    return Facts(type(t), t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype, t.device, t.element_size())


@dataclass(frozen=True)
class Verdict:
    """``valid``, or the argument the refusal names first (``name``) and the clause it breaks."""

    valid: bool
    name: str | None = None
    clause: str | None = None

    @property
    def on_device(self):
        """Refused for a device (every other clause holds)."""
        return not self.valid and self.clause == DEVICE


VALID = Verdict(True)


class _Refused(Exception):
    def __init__(self, name, clause):
        super().__init__(name, clause)
        self.verdict = Verdict(False, name, clause)


def _require(ok, name, clause):
    if not ok:
        raise _Refused(name, clause)


def is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_tile(value):
    return is_int(value) and 1 <= value <= MAX_TILE


def is_contiguous(f):
    """Row-major dense: each dimension of size > 1 strides over the elements of the later ones."""
    if 0 in f.shape:
        return True
    dense = 1
    for n, s in reversed(list(zip(f.shape, f.strides))):
        if n > 1 and s != dense:
            return False
        dense *= n
    return True


def span(f):
    """[first byte, one past the last byte) the tensor's elements reach."""
    last = sum((n - 1) * s for n, s in zip(f.shape, f.strides))
    return f.address, f.address + (last + 1) * f.element_size


def f32_finite(value):
    """``value`` rounded to float32 (through float64, as numpy.float32 converts a number) is finite."""
    try:
        x = float(value)
    except OverflowError:  # an int beyond every float64
        return False
    return math.isfinite(x) and abs(x) < F32_OVERFLOW


def is_dense(t):
    return t.layout == torch.strided and not t.is_nested


def _tensor(name, t, dtype, shape, addresses):
    _require(isinstance(t, torch.Tensor), name, "tensor")
    _require(is_dense(t), name, "layout")
    f = facts(t)
    _require(f.dtype == dtype, name, "dtype")
    _require(f.shape == shape, name, "shape")
    _require(is_contiguous(f), name, "contiguous")
    _require(not addresses or f.address % ALIGN[name] == 0, name, "alignment")
    return f


def _logits(logits, addresses):
    _require(isinstance(logits, torch.Tensor) and logits.dim() == 2, "logits", "tensor")
    _require(is_dense(logits), "logits", "layout")
    b = logits.shape[0]
    _require(1 <= b <= MAX_TOKENS, "logits", "rows")
    f = facts(logits)
    _require(f.dtype == torch.float32, "logits", "dtype")
    _require(f.shape == (b, EXPERTS), "logits", "shape")
    _require(f.strides[1] == 1 and f.strides[0] % ROW_GRANULE == 0, "logits", "strides")
    _require(not addresses or f.address % ALIGN["logits"] == 0, "logits", "alignment")
    return b


def _metadata_request(metadata, local_expert_offset, num_local_experts, tile_n, addresses):
    scalars = dict(zip(METADATA_SCALARS, (local_expert_offset, num_local_experts, tile_n)))
    if metadata is None:
        for name, value in scalars.items():
            _require(not isinstance(value, bool) and value == 0, name, "without metadata")
        return
    _require(is_tile(tile_n), "tile_n", "range")
    _require(is_int(local_expert_offset) and 0 <= local_expert_offset <= EXPERTS, "local_expert_offset", "range")
    _require(is_int(num_local_experts) and 0 <= num_local_experts <= EXPERTS - int(local_expert_offset),
             "num_local_experts", "range")
    _require(isinstance(metadata, torch.Tensor) and metadata.dim() == 1, "metadata", "tensor")
    f = _tensor("metadata", metadata, torch.int32, tuple(metadata.shape), addresses)
    _require(math.prod(f.shape) >= metadata_size(int(tile_n)), "metadata", "size")


def _overlaps(tensors):
    outputs = [n for n in OUTPUTS if tensors.get(n) is not None]
    spans = {n: (t.device, *span(facts(t))) for n, t in tensors.items() if t is not None}
    for i, name in enumerate(outputs):
        for other in outputs[i + 1:] + ["logits", "bias"]:
            (device, a0, a1), (other_device, b0, b1) = spans[name], spans[other]
            _require(device != other_device or not (a0 < b1 and b0 < a1), name, "overlap")


def _devices(tensors):
    device = tensors["logits"].device
    _require(device.type == "cuda", "logits", DEVICE)
    for name in TENSORS:
        t = tensors.get(name)
        _require(t is None or t.device == device, name, DEVICE)


def judge(logits, bias, ids, weights, scale, renormalize=True, metadata=None, local_expert_offset=0,
          num_local_experts=0, tile_n=0, addresses=True):
    """The Verdict on a call of route with these arguments; ``addresses=False``: without the clauses that read
    addresses (alignment, overlap), as the checks of tensors without memory (route's torch op on fake tensors)."""
    try:
        b = _logits(logits, addresses)
        _tensor("bias", bias, torch.float32, (EXPERTS,), addresses)
        _tensor("ids", ids, torch.int32, (b, TOP_K), addresses)
        _tensor("weights", weights, torch.float32, (b, TOP_K), addresses)
        _require(isinstance(scale, numbers.Real) and not isinstance(scale, bool), "scale", "real")
        _require(f32_finite(scale), "scale", "finite")
        _require(isinstance(renormalize, bool), "renormalize", "bool")
        _metadata_request(metadata, local_expert_offset, num_local_experts, tile_n, addresses)
        tensors = {"logits": logits, "bias": bias, "metadata": metadata, "ids": ids, "weights": weights}
        if addresses:
            _overlaps(tensors)
        _devices(tensors)
    except _Refused as refused:
        return refused.verdict
    return VALID
