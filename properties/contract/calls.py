"""A route call as plain data (``Call``), and its tensors made as views of one byte arena per device.

Every tensor argument is a ``Placed``: dtype, shape, strides and a byte offset into the arena of the call's
device (or of the CPU, ``on_cpu``), so that misaligned addresses, padded and expanded strides and tensors
overlapping each other are all just numbers, Hypothesis shrinks them, and the arena's bytes, snapshotted
before a call, show any byte a call changed. Any other value of a tensor argument is passed as it is.
The arena starts on a 64-byte boundary (torch's allocators), so an offset's residue mod 32 is the address's.
"""

from dataclasses import dataclass, replace

import numpy as np
import torch

from kernel.layout import EXPERTS, TOP_K, metadata_size
from properties.engine.poison import IDS_POISON, METADATA_POISON, WEIGHT_POISON_BITS

ARGUMENTS = ("logits", "bias", "ids", "weights", "scale", "renormalize", "metadata", "local_expert_offset",
             "num_local_experts", "tile_n")
NOT_TENSORS = {"list": [0.0] * 4, "None": None, "ndarray": np.zeros(4, np.float32), "int": 3}
# Tensors that are not dense, made from a view of the arena (copies: a refusal's arena stays as it was).
FORMS = {"sparse": lambda t: t.to_sparse(), "nested": lambda t: torch.nested.nested_tensor([t], layout=torch.jagged),
         # torch.nested's default layout, of the rows: as many dimensions as the tensor, yet no .shape to read
         "nested_rows": lambda t: torch.nested.nested_tensor(list(t) if t.dim() > 1 else [t])}
ARENA_SLACK = 64  # bytes past the last tensor's span
OUTPUT_DTYPES = {"ids": torch.int32, "weights": torch.float32, "metadata": torch.int32}
POISON_BITS = {"ids": IDS_POISON, "weights": WEIGHT_POISON_BITS, "metadata": METADATA_POISON}  # as int32


def element_size(dtype):
    return torch.empty((), dtype=dtype).element_size()


@dataclass(frozen=True)
class Placed:
    """A tensor argument: ``shape`` with ``strides`` (elements) at byte ``offset`` of its arena."""

    dtype: torch.dtype
    shape: tuple
    strides: tuple
    offset: int
    on_cpu: bool = False  # in the CPU arena whatever the call's device
    form: str = "dense"  # or a key of FORMS: the view handed over as a sparse or nested copy

    def extent(self):
        """Bytes from the offset to one past the last byte the elements reach (0 when empty)."""
        if 0 in self.shape:
            return 0
        return (sum((n - 1) * s for n, s in zip(self.shape, self.strides)) + 1) * element_size(self.dtype)

    def end(self):
        return self.offset + self.extent()


def dense_strides(shape):
    """Row-major strides of ``shape``."""
    strides, dense = [], 1
    for n in reversed(shape):
        strides.append(dense)
        dense *= n
    return tuple(reversed(strides))


def contiguous(dtype, shape, offset=0):
    return Placed(dtype, tuple(shape), dense_strides(shape), offset)


@dataclass(frozen=True)
class Call:
    """route's ten arguments, each a Placed or the value itself."""

    logits: object
    bias: object
    ids: object
    weights: object
    scale: object
    renormalize: object
    metadata: object
    local_expert_offset: object
    num_local_experts: object
    tile_n: object

    def placed(self):
        """{argument name: Placed} of the tensor arguments."""
        return {name: getattr(self, name) for name in ARGUMENTS if isinstance(getattr(self, name), Placed)}

    def describe(self):
        return ", ".join(f"{name}={_describe(getattr(self, name))}" for name in ARGUMENTS)


def _describe(value):
    if isinstance(value, Placed):
        where = " on the CPU" if value.on_cpu else ""
        form = "" if value.form == "dense" else f" as a {value.form} tensor"
        dtype = str(value.dtype).removeprefix("torch.")
        return f"{dtype}{list(value.shape)} strides {value.strides} at +{value.offset}{where}{form}"
    return f"{type(value).__name__}({value!r})" if type(value).__module__ == "numpy" else repr(value)


def view(arena, placed):
    """The tensor ``placed`` describes, a view of ``arena`` (a uint8 tensor)."""
    size = element_size(placed.dtype)
    count = (arena.numel() - placed.offset) // size
    if arena.device.type == "cpu":  # any byte offset, so misaligned addresses too
        flat = torch.frombuffer(arena.numpy(), dtype=placed.dtype, offset=placed.offset, count=count)
    else:
        flat = arena[placed.offset:placed.offset + count * size].view(placed.dtype)
    return flat.as_strided(placed.shape, placed.strides)


@dataclass
class Made:
    """A Call's arguments made on ``device``: the arenas, and route's keyword arguments over them."""

    call: Call
    arenas: dict  # device type -> uint8 arena
    arguments: dict

    def snapshot(self):
        """The bytes of every arena, on the host."""
        return {kind: arena.cpu().numpy().copy() for kind, arena in self.arenas.items()}


def arena_bytes(call):
    return max([p.end() for p in call.placed().values()] + [0]) + ARENA_SLACK


def arenas_for(calls, device, seed=0):
    """{"cpu": arena, device type: arena} of standard normal float32 values (from ``seed``), large enough for
    every Call of ``calls``."""
    size = -(-max(arena_bytes(call) for call in calls) // 16) * 16
    rng = np.random.default_rng(seed)
    arenas = {}
    for kind in {"cpu", torch.device(device).type}:
        values = torch.from_numpy(rng.standard_normal(size // 4, dtype=np.float32)).view(torch.uint8)
        arenas[kind] = values.to(device if kind != "cpu" else "cpu")
    return arenas


def make(call, device, seed=0, arenas=None):
    """The Call's tensors on ``device`` (``on_cpu`` ones on the CPU) in ``arenas`` (default: fresh ones from
    ``seed``), then every contiguous output of its own dtype poisoned (the others make the call invalid: the
    arenas' bytes are what a refusal must leave)."""
    arenas = arenas_for([call], device, seed) if arenas is None else arenas
    arguments = {}
    for name in ARGUMENTS:
        value = getattr(call, name)
        if isinstance(value, Placed):
            value = view(arenas["cpu" if value.on_cpu else torch.device(device).type], value)
        arguments[name] = value
    for name, bits in POISON_BITS.items():
        t = arguments[name]
        if isinstance(t, torch.Tensor) and t.dtype == OUTPUT_DTYPES[name] and t.is_contiguous():
            t.view(torch.int32).fill_(bits)
    for name, p in call.placed().items():  # after the poison: a copy leaves the arena as it was
        if p.form != "dense":
            arguments[name] = FORMS[p.form](arguments[name])
    return Made(call, arenas, arguments)


# ---------------------------------------------------------------------------------------------- building calls

REGION = 256  # bytes: each tensor's region starts on such a boundary, plus its residue


def relayout(call):
    """The Call with its tensors (CPU ones apart) in disjoint regions after a free one (room to overlap
    another from before its start), in argument order, each keeping its offset's residue mod 32."""
    free = REGION + max([p.extent() for p in call.placed().values()] + [0])
    ends = {"cpu": free, "device": free}
    changes = {}
    for name, p in call.placed().items():
        kind = "cpu" if p.on_cpu else "device"
        start = -(-ends[kind] // REGION) * REGION
        changes[name] = replace(p, offset=start + p.offset % 32)
        ends[kind] = changes[name].end() + REGION
    return replace(call, **changes)


def valid_call(b, tile_n=None, local_expert_offset=0, num_local_experts=0, scale=2.5, renormalize=True):
    """A call valid in every way but, on the CPU, the device: contiguous aligned tensors in disjoint regions
    (metadata of exactly metadata_size(tile_n) elements when ``tile_n``)."""
    metadata = None if tile_n is None else contiguous(torch.int32, (metadata_size(tile_n),))
    return relayout(Call(contiguous(torch.float32, (b, EXPERTS)), contiguous(torch.float32, (EXPERTS,)),
                         contiguous(torch.int32, (b, TOP_K)), contiguous(torch.float32, (b, TOP_K)), scale,
                         renormalize, metadata, local_expert_offset if tile_n else 0,
                         num_local_experts if tile_n else 0, 0 if tile_n is None else tile_n))


def changed(call, name, **fields):
    """The Call with tensor ``name``'s Placed fields changed, relaid out."""
    return relayout(replace(call, **{name: replace(getattr(call, name), **fields)}))


def with_residue(call, name, residue):
    """Tensor ``name`` ``residue`` bytes (0 to 31) past a 32-byte boundary."""
    p = getattr(call, name)
    return replace(call, **{name: replace(p, offset=p.offset - p.offset % 32 + residue)})


def over(call, name, other, delta):
    """Output ``name`` moved to start ``delta`` bytes after tensor ``other`` starts (no relayout)."""
    return replace(call, **{name: replace(getattr(call, name), offset=getattr(call, other).offset + delta)})
