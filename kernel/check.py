"""Run kernel.routing on the GPU against the NumPy model, bit for bit, with diagnostics in hex.

Shared by the GPU tests and ``python -m kernel.smoke``; the inputs are the project's adversarial row
families (properties/families.py). Outputs (and the rows and metadata elements the kernel must
not write) are poisoned before each call; a result is equal only if every bit is.
"""

from dataclasses import dataclass

import numpy as np
import torch

from kernel import routing
from kernel.layout import (
    EXPERTS,
    MAX_TOKENS,
    TOP_K,
    metadata_field,
    metadata_size,
)
from oracles.numpy_model import route as model_route
from oracles.numpy_model import routing_metadata

POISON_ID = 0x7F7F7F7F
POISON_WEIGHT_BITS = 0x7FBADBAD  # a NaN no float operation of the kernel produces
POISON_METADATA = 0x5A5A5A5A


@dataclass(frozen=True)
class Local:
    """The metadata request: local experts [offset, offset + count), GEMM tile ``tile``."""

    offset: int
    count: int
    tile: int


def _hex_row(values):
    return " ".join(f"{int(v) & 0xFFFFFFFF:08x}" for v in values)


def _compare_rows(what, got, expected, limit=3):
    bad = np.flatnonzero((got != expected).any(axis=1))
    lines = []
    for row in bad[:limit]:
        lines += [f"{what} row {row}: expected {_hex_row(expected[row])}",
                  f"{' ' * len(what)}        got      {_hex_row(got[row])}"]
    if len(bad) > limit:
        lines.append(f"{what}: {len(bad)} rows differ in all")
    return lines


def _compare_metadata(got, expected, tile, limit=8):
    bad = np.flatnonzero(got != expected)
    lines = [f"metadata {metadata_field(i, tile)} (element {i}): expected {int(expected[i])} "
             f"({int(expected[i]) & 0xFFFFFFFF:08x}) got {int(got[i])} ({int(got[i]) & 0xFFFFFFFF:08x})"
             for i in bad[:limit]]
    if len(bad) > limit:
        lines.append(f"metadata: {len(bad)} elements differ in all")
    return lines


@dataclass
class Buffers:
    """Device tensors of one call; outputs are views of poisoned buffers that hold MAX_TOKENS rows and
    some metadata past the end, so writes outside the contract show."""

    logits: torch.Tensor
    bias: torch.Tensor
    ids_all: torch.Tensor
    weights_all: torch.Tensor
    metadata_all: torch.Tensor | None
    b: int

    @property
    def ids(self):
        return self.ids_all[:self.b]

    @property
    def weights(self):
        return self.weights_all[:self.b]

    def poison(self):
        self.ids_all.fill_(POISON_ID)
        self.weights_all.view(torch.int32).fill_(POISON_WEIGHT_BITS)
        if self.metadata_all is not None:
            self.metadata_all.fill_(POISON_METADATA)


METADATA_SLACK = 36  # elements past metadata_size(tile) that must stay untouched


def make_buffers(logits, bias, local, device, row_stride=EXPERTS):
    """Device copies of the inputs (logits rows ``row_stride`` apart) and poisoned outputs."""
    b = logits.shape[0]
    rows = torch.zeros((b, row_stride), dtype=torch.float32, device=device)
    rows[:, :EXPERTS] = torch.from_numpy(logits).to(device)
    metadata = None
    if local is not None:
        metadata = torch.empty(metadata_size(local.tile) + METADATA_SLACK, dtype=torch.int32, device=device)
    buffers = Buffers(rows[:, :EXPERTS], torch.from_numpy(bias).to(device),
                      torch.empty((MAX_TOKENS, TOP_K), dtype=torch.int32, device=device),
                      torch.empty((MAX_TOKENS, TOP_K), dtype=torch.float32, device=device), metadata, b)
    buffers.poison()
    return buffers


def call_route(buffers, scale, renormalize, local):
    """route on the buffers (the metadata vector passed whole, slack included)."""
    if local is None:
        routing.route(buffers.logits, buffers.bias, buffers.ids, buffers.weights, scale, renormalize)
    else:
        routing.route(buffers.logits, buffers.bias, buffers.ids, buffers.weights, scale, renormalize,
                      buffers.metadata_all, local.offset, local.count, local.tile)


def expected(logits, bias, scale, renormalize, local):
    """(ids [8, 8], weight bits [8, 8], metadata or None) as the poisoned buffers must read after a call."""
    b = logits.shape[0]
    ids = np.full((MAX_TOKENS, TOP_K), POISON_ID, np.int32)
    weights = np.full((MAX_TOKENS, TOP_K), POISON_WEIGHT_BITS, np.uint32).view(np.int32)
    ids[:b], w = model_route(logits, bias, scale, renormalize)
    weights[:b] = w.view(np.int32)
    metadata = None
    if local is not None:
        metadata = np.concatenate([
            routing_metadata(ids[:b], local.offset, local.count, local.tile, fill=POISON_METADATA),
            np.full(METADATA_SLACK, POISON_METADATA, np.int32)])
    return ids, weights, metadata


def compare(buffers, want, tile):
    """Mismatch lines (empty when every bit is equal) between the buffers and ``expected``'s result."""
    ids, weights, metadata = want
    lines = _compare_rows("ids    ", buffers.ids_all.cpu().numpy(), ids)
    lines += _compare_rows("weights", buffers.weights_all.view(torch.int32).cpu().numpy(), weights)
    if metadata is not None:
        lines += _compare_metadata(buffers.metadata_all.cpu().numpy(), metadata, tile)
    return lines


def run_case(logits, bias, scale, renormalize, local=None, device="cuda", row_stride=EXPERTS):
    """Route once on fresh poisoned buffers; returns the mismatch lines (empty when bit-exact)."""
    buffers = make_buffers(logits, bias, local, device, row_stride)
    call_route(buffers, scale, renormalize, local)
    torch.cuda.synchronize(device)
    return compare(buffers, expected(logits, bias, scale, renormalize, local), local.tile if local else 0)


def describe(case, scale, renormalize, local, lines):
    """A failure report: the case, then its mismatch lines."""
    head = f"{case} scale={scale!r} renormalize={renormalize} local={local}"
    return "\n".join([head] + ["  " + line for line in lines])


def unpicked_range(ids):
    """The longest run of experts [offset, offset + count) holding none of ``ids`` (count >= 1)."""
    edges = np.concatenate([[-1], np.unique(ids), [EXPERTS]])
    gap = int(np.argmax(np.diff(edges)))
    return int(edges[gap] + 1), int(edges[gap + 1] - edges[gap] - 1)

