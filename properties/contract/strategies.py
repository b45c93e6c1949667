"""Hypothesis strategies of route calls at the edges of every clause of its contract, valid and invalid.

``calls(cuda)`` draws a valid call (b, metadata or not, a tile, a local range) and then up to two edges,
each a strategy named for the edge it makes, drawing both sides of it (a row stride of 260 is valid, 258 is
not; an output ending where the next tensor starts is valid, one element further is not). ``cuda``: the
tensors go to a CUDA device, where a tensor's address can only move by whole elements and a tensor may be
put on the CPU instead (the device clause).
"""

from dataclasses import replace
from fractions import Fraction

import numpy as np
import torch
from hypothesis import assume
from hypothesis import strategies as st

from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS, TOP_K, metadata_size
from properties.contract.calls import FORMS, NOT_TENSORS, Placed, changed, dense_strides, element_size, over, \
    valid_call, with_residue
from properties.contract.predicate import F32_OVERFLOW, OUTPUTS, TENSORS, is_tile

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float64, torch.int32)
INT_DTYPES = (torch.int64, torch.int16, torch.uint8, torch.bool, torch.float32)


def rows():
    """b: 1 to MAX_TOKENS, and 0 and past the end."""
    return st.one_of(st.integers(1, MAX_TOKENS), st.sampled_from([0, MAX_TOKENS + 1, MAX_TOKENS + 2, 16, 64]))


def tiles():
    """tile_n: 0 to MAX_TILE + 1, and values of other types."""
    return st.one_of(st.integers(0, MAX_TILE + 1),
                     st.sampled_from([-1, True, False, 8.0, np.int64(8), np.int32(MAX_TILE), None, "8"]))


def local_ranges():
    """(local_expert_offset, num_local_experts) at and past both ends of [0, EXPERTS]."""
    offsets = st.one_of(st.integers(-1, EXPERTS + 1),
                        st.sampled_from([0, EXPERTS, True, 16.0, np.int64(16), np.uint8(16), np.int8(100)]))

    def counts(offset):
        room = EXPERTS - int(offset) if isinstance(offset, (int, np.integer)) else EXPERTS
        return st.one_of(st.integers(-1, EXPERTS + 1),
                         st.sampled_from([room, room + 1, room - 1, 0, False, 8.0, np.int16(8), np.uint8(8)]))

    return offsets.flatmap(lambda offset: counts(offset).map(lambda count: (offset, count)))


def scales():
    """Finite floats, NaN, infinities, -0.0, the float32 overflow threshold and the float just below it, huge
    ints, bools, numpy scalars, fractions, strings."""
    below = float(np.nextafter(F32_OVERFLOW, 0))
    return st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.floats(-4.0, 4.0),
        st.sampled_from([0.0, -0.0, 2.5, float("nan"), float("inf"), -float("inf"), F32_OVERFLOW, -F32_OVERFLOW,
                         below, -below, 3.4028234663852886e38, 2 ** 128, 10 ** 400, -10 ** 400, 7, 0, True, False,
                         np.float32(2.5), np.float64(-0.0), np.float16(1.5), np.int64(3), np.bool_(True),
                         Fraction(5, 2), "2.5", None, 1j]))


def renormalizes():
    return st.sampled_from([True, False, 1, 0, np.bool_(True), None, "yes"])


def residues(cuda, dtype):
    """A tensor's address past a 32-byte boundary: 0 to 31 bytes on the CPU, whole elements on a GPU."""
    step = element_size(dtype) if cuda else 1
    return st.sampled_from(list(range(0, 32, step)))


def row_strides():
    """The logits row stride: dense, padded by 1 to 8 elements, doubled, expanded (0), overlapping rows."""
    return st.one_of(st.integers(EXPERTS - 4, EXPERTS + 8), st.sampled_from([0, 4, 8, 2 * EXPERTS, 3 * EXPERTS]))


def edge_rows(call, cuda):
    return rows().map(lambda b: valid_call(b, *_request(call)))


def _has_metadata(call):
    return isinstance(call.metadata, Placed)


def _request(call):
    """(tile_n, offset, count) of a call with metadata, else (None,)."""
    if not _has_metadata(call):
        return (None,)
    return call.tile_n, call.local_expert_offset, call.num_local_experts


def edge_dtype(call, cuda):
    """One tensor of another dtype (its strides kept)."""
    names = [n for n in TENSORS if isinstance(getattr(call, n), Placed)]

    def wrong(name):
        pool = INT_DTYPES if name in ("ids", "metadata") else FLOAT_DTYPES
        return st.sampled_from(pool).map(lambda dtype: changed(call, name, dtype=dtype))

    return st.sampled_from(names).flatmap(wrong)


def edge_shape(call, cuda):
    """One tensor of another shape (dense strides for it)."""
    b = call.logits.shape[0]
    shapes = {"logits": [(b, EXPERTS - 1), (b, EXPERTS + 1), (EXPERTS,), (1, b, EXPERTS)],
              "bias": [(EXPERTS - 1,), (EXPERTS + 1,), (1, EXPERTS)],
              "ids": [(b, TOP_K - 1), (b, TOP_K + 1), (b + 1, TOP_K), (TOP_K,), (TOP_K, b)],
              "weights": [(b, TOP_K - 1), (b + 1, TOP_K), (max(b - 1, 0), TOP_K), (b * TOP_K,)]}
    if _has_metadata(call):
        shapes["metadata"] = [(1, call.metadata.shape[0]), (call.metadata.shape[0], 1)]

    return st.sampled_from([(n, s) for n, ss in shapes.items() for s in ss]).map(
        lambda ns: changed(call, ns[0], shape=ns[1], strides=dense_strides(ns[1])))


def edge_strides(call, cuda):
    """One tensor's strides: padded, expanded (0), transposed, column stride 2, overlapping rows."""
    b = call.logits.shape[0]
    options = [row_strides().map(lambda s: ("logits", (s, 1))),
               st.sampled_from([("logits", (2 * EXPERTS, 2)), ("logits", (1, b)), ("logits", (EXPERTS, 0)),
                                ("bias", (2,)), ("bias", (0,)), ("bias", (EXPERTS,))]),
               st.sampled_from(["ids", "weights"]).flatmap(lambda n: st.sampled_from(
                   [(TOP_K + 1, 1), (2 * TOP_K, 1), (0, 1), (1, b), (2 * TOP_K, 2), (TOP_K, 0), (3, 1), (64, 1)]
               ).map(lambda s: (n, s)))]
    if _has_metadata(call):
        options.append(st.sampled_from([("metadata", (2,)), ("metadata", (0,)), ("metadata", (4,))]))
    def fits(choice):  # an earlier edge may have changed the tensor's rank
        name, strides = choice
        return isinstance(getattr(call, name), Placed) and len(getattr(call, name).shape) == len(strides)

    return st.one_of(options).filter(fits).map(lambda ns: changed(call, ns[0], strides=ns[1]))


def edge_alignment(call, cuda):
    """One tensor's address moved off (or onto) a 16-byte boundary, or onto one that is not 32 bytes."""
    names = [n for n in TENSORS if isinstance(getattr(call, n), Placed)]
    return st.sampled_from(names).flatmap(
        lambda n: residues(cuda, getattr(call, n).dtype).map(lambda r: with_residue(call, n, r)))


def edge_overlap(call, cuda):
    """An output moved onto another tensor: from just touching it (valid) to sharing one element, or inside."""
    outputs = [n for n in OUTPUTS if isinstance(getattr(call, n), Placed)]
    pairs = [(n, o) for n in outputs for o in TENSORS if o != n and isinstance(getattr(call, o), Placed)]

    def deltas(name, other):
        mine, theirs = getattr(call, name), getattr(call, other)
        size = element_size(mine.dtype)
        before, after = -mine.extent(), theirs.extent()  # touching from before, touching from after
        return st.one_of(st.sampled_from([before, before + size, after, after - size, 0]),
                         st.integers(before // size, after // size).map(lambda k: k * size))

    return st.sampled_from(pairs).flatmap(
        lambda pair: deltas(*pair).map(lambda d: over(call, pair[0], pair[1], d)))


def edge_metadata_size(call, cuda):
    """Metadata of metadata_size(tile_n) - 2 .. + 2 elements, or far more (with the slack)."""
    if not _has_metadata(call) or not is_tile(call.tile_n):  # (an earlier edge may have broken the tile)
        return edge_metadata_arguments(call, cuda)
    size = metadata_size(int(call.tile_n))
    return st.sampled_from([size - 2, size - 1, size, size + 1, size + 2, size + 36, 1, 0]).map(
        lambda n: changed(call, "metadata", shape=(n,), strides=(1,)))


def edge_metadata_arguments(call, cuda):
    """No metadata with one of the request's scalars nonzero (or zero of another type); with metadata, the
    metadata left out (None) with the request's scalars kept."""
    zeros_or_not = st.sampled_from([0, 0.0, -0.0, np.int64(0), False, 1, 3, EXPERTS, -1, True, None])
    names = ("local_expert_offset", "num_local_experts", "tile_n")
    if not _has_metadata(call):
        return st.tuples(st.sampled_from(names), zeros_or_not).map(lambda nv: replace(call, **{nv[0]: nv[1]}))
    return st.just(replace(call, metadata=None))


def edge_tile(call, cuda):
    """tile_n at and past its ends (metadata sized for it where it is a valid tile)."""
    if not _has_metadata(call):
        return edge_metadata_arguments(call, cuda)

    def apply(tile):
        new = replace(call, tile_n=tile)
        return changed(new, "metadata", shape=(metadata_size(int(tile)),), strides=(1,)) if is_tile(tile) else new

    return tiles().map(apply)


def edge_local_range(call, cuda):
    if not _has_metadata(call):
        return edge_metadata_arguments(call, cuda)
    return local_ranges().map(lambda r: replace(call, local_expert_offset=r[0], num_local_experts=r[1]))


def edge_scale(call, cuda):
    return scales().map(lambda s: replace(call, scale=s))


def edge_renormalize(call, cuda):
    return renormalizes().map(lambda r: replace(call, renormalize=r))


def edge_not_a_tensor(call, cuda):
    """One tensor argument replaced by a list, None, a NumPy array or an int."""
    names = [n for n in TENSORS if isinstance(getattr(call, n), Placed)]
    return st.tuples(st.sampled_from(names), st.sampled_from(list(NOT_TENSORS.values()))).map(
        lambda nv: replace(call, **{nv[0]: nv[1]}))


def edge_not_dense(call, cuda):
    """One tensor argument handed over as a sparse or a nested tensor."""
    names = [n for n in TENSORS if isinstance(getattr(call, n), Placed)]
    return st.tuples(st.sampled_from(names), st.sampled_from(list(FORMS))).map(
        lambda nf: changed(call, nf[0], form=nf[1]))


def edge_device(call, cuda):
    """One tensor on the CPU while the others are on the GPU (on the CPU tier, every call is on the CPU)."""
    names = [n for n in TENSORS if isinstance(getattr(call, n), Placed)]
    return st.sampled_from(names).map(lambda n: changed(call, n, on_cpu=True))


EDGES = {"rows": edge_rows, "dtype": edge_dtype, "shape": edge_shape, "strides": edge_strides,
         "alignment": edge_alignment, "metadata_size": edge_metadata_size,
         "metadata_arguments": edge_metadata_arguments, "tile": edge_tile, "local_range": edge_local_range,
         "scale": edge_scale, "renormalize": edge_renormalize, "not_a_tensor": edge_not_a_tensor,
         "not_dense": edge_not_dense, "overlap": edge_overlap, "device": edge_device}
LAST = ("not_a_tensor", "overlap", "device")  # edges whose change a relayout would undo or that need tensors


def valid_calls():
    """A valid call (but for the device on the CPU): b, metadata or not, a tile, a local range, scalars."""
    request = st.one_of(st.just((None,)), st.tuples(st.integers(1, MAX_TILE), st.integers(0, EXPERTS)).flatmap(
        lambda to: st.integers(0, EXPERTS - to[1]).map(lambda count: (to[0], to[1], count))))
    return st.tuples(st.integers(1, MAX_TOKENS), request, st.floats(-8.0, 8.0, width=32), st.booleans()).map(
        lambda d: valid_call(d[0], *d[1], scale=d[2], renormalize=d[3]))


@st.composite
def calls(draw, cuda=False):
    """A valid call with up to two edges applied (the CPU tier never draws the device edge)."""
    call = draw(valid_calls())
    names = [n for n in EDGES if cuda or n != "device"]
    count = draw(st.sampled_from([1, 2, 1, 0]))  # mostly one edge; none gives the plain valid calls
    chosen = draw(st.lists(st.sampled_from(names), min_size=count, max_size=count, unique=True))
    for name in sorted(chosen, key=lambda n: (n != "rows", n in LAST)):  # rows remakes the call: first
        call = draw(EDGES[name](call, cuda))
    assume(not cuda or buildable_on_gpu(call))
    return call


def buildable_on_gpu(call):
    """Every GPU tensor of ``call`` starts on a whole element of its dtype (a CUDA view can start nowhere else)."""
    return all(p.offset % element_size(p.dtype) == 0 for p in call.placed().values() if not p.on_cpu)
