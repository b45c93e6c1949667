"""One routing problem (the inputs every implementation receives, held as exact float32 bit patterns) and what
one implementation wrote for it."""

from dataclasses import dataclass, replace

import numpy as np

from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS
from properties.engine.floats import f32_bits

FIELDS = ("ids", "weights", "metadata")


def _fail(name, contract, got):
    raise ValueError(f"RoutingCase: {name} must be {contract}, got {got!r}")


def _check_floats(name, x, shape_text, shape_ok):
    if not isinstance(x, np.ndarray) or x.dtype != np.float32:
        _fail(name, f"a float32 NumPy array {shape_text}", getattr(x, "dtype", type(x).__name__))
    if not shape_ok(x.shape):
        _fail(name, f"of shape {shape_text}", x.shape)
    if np.isnan(x).any():
        _fail(name, "free of NaN (outside the routing domain)", "a NaN")


def _check_int(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        _fail(name, f"an int in [{low}, {high}]", value)


@dataclass(frozen=True, eq=False)
class RoutingCase:
    """Inputs of one routing call. ``tile_n`` None asks for no metadata (offset and count then 0).

    logits float32 [b, 256] (1 <= b <= 8) and bias float32 [256], no NaN; scale a finite float32;
    ``generator`` names the strategy (or derivation) the case came from.
    """

    logits: np.ndarray
    bias: np.ndarray
    scale: np.float32
    renormalize: bool
    tile_n: int | None
    local_expert_offset: int
    num_local_experts: int
    generator: str

    def __post_init__(self):
        _check_floats("logits", self.logits, f"[b, {EXPERTS}] with 1 <= b <= {MAX_TOKENS}",
                      lambda s: len(s) == 2 and 1 <= s[0] <= MAX_TOKENS and s[1] == EXPERTS)
        _check_floats("bias", self.bias, f"[{EXPERTS}]", lambda s: s == (EXPERTS,))
        if not isinstance(self.scale, np.float32) or not np.isfinite(self.scale):
            _fail("scale", "a finite np.float32", self.scale)
        if not isinstance(self.renormalize, bool):
            _fail("renormalize", "a bool", self.renormalize)
        if self.tile_n is None:
            if self.local_expert_offset != 0 or self.num_local_experts != 0:
                _fail("local_expert_offset/num_local_experts", "0 when no metadata is asked for (tile_n None)",
                      (self.local_expert_offset, self.num_local_experts))
        else:
            _check_int("tile_n", self.tile_n, 1, MAX_TILE)
            _check_int("local_expert_offset", self.local_expert_offset, 0, EXPERTS)
            _check_int("num_local_experts", self.num_local_experts, 0, EXPERTS - self.local_expert_offset)
        if not isinstance(self.generator, str) or not self.generator:
            _fail("generator", "a non-empty str", self.generator)

    @property
    def b(self):
        return self.logits.shape[0]

    @property
    def has_metadata(self):
        return self.tile_n is not None

    def with_rows(self, order, generator):
        """The case on logits rows ``order`` (indices into this case's rows), named ``generator``."""
        return replace(self, logits=np.ascontiguousarray(self.logits[list(order)]), generator=generator)

    def describe(self):
        """One line: the generator, b, scale, renormalize and the metadata request."""
        request = (f"tile_n={self.tile_n} local=[{self.local_expert_offset}, "
                   f"{self.local_expert_offset + self.num_local_experts})" if self.has_metadata else "no metadata")
        return f"{self.generator} b={self.b} scale={float(self.scale)!r} renormalize={self.renormalize} {request}"

    def same_inputs(self, other):
        """True when both cases hold the same bits and parameters (the generator name aside)."""
        return (self.logits.shape == other.logits.shape
                and np.array_equal(f32_bits(self.logits), f32_bits(other.logits))
                and np.array_equal(f32_bits(self.bias), f32_bits(other.bias))
                and f32_bits(self.scale) == f32_bits(other.scale)
                and (self.renormalize, self.tile_n, self.local_expert_offset, self.num_local_experts)
                == (other.renormalize, other.tile_n, other.local_expert_offset, other.num_local_experts))


@dataclass(frozen=True, eq=False)
class Outputs:
    """What one implementation wrote; None for a field it does not produce.

    ids int32 [b, 8], weights float32 [b, 8], metadata int32 [metadata_size(tile_n)]; the kernel's whole
    buffers (properties/engine/device.py) are larger: [MAX_TOKENS, 8] and metadata with slack.
    """

    ids: np.ndarray | None
    weights: np.ndarray | None
    metadata: np.ndarray | None
