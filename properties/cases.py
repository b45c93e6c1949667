"""One routing problem: the inputs every implementation receives, held as exact float32 bit patterns."""

from dataclasses import dataclass, replace

import numpy as np

from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS


def f32(bits):
    """float32 array (or scalar) with the given uint32 bit patterns."""
    return np.asarray(bits, np.uint64).astype(np.uint32).view(np.float32)


def f32_bits(x):
    """uint32 bit patterns of float32 ``x``."""
    return np.asarray(x, np.float32).view(np.uint32)


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

    def same_inputs(self, other):
        """True when both cases hold the same bits and parameters (the generator name aside)."""
        return (self.logits.shape == other.logits.shape
                and np.array_equal(f32_bits(self.logits), f32_bits(other.logits))
                and np.array_equal(f32_bits(self.bias), f32_bits(other.bias))
                and f32_bits(self.scale) == f32_bits(other.scale)
                and (self.renormalize, self.tile_n, self.local_expert_offset, self.num_local_experts)
                == (other.renormalize, other.tile_n, other.local_expert_offset, other.num_local_experts))
