"""The targeted calls: every clause of the contract at its edge, on both sides, as fixed calls by group.

``targeted(cuda)`` maps each group (a clause, or the argument it is about) to {label: Call}. The Hypothesis
strategies (properties/contract/strategies.py) draw around the same edges; these are the ones a run must
always hold, whatever it draws. ``cuda``: addresses move by whole elements only, and the device group puts
each tensor on the CPU in turn.
"""

from dataclasses import replace
from fractions import Fraction

import numpy as np
import torch

from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS, TOP_K, metadata_size
from properties.contract.calls import FORMS, NOT_TENSORS, changed, dense_strides, element_size, over, valid_call, \
    with_residue
from properties.contract.predicate import ALIGN, F32_OVERFLOW, OUTPUTS, TENSORS, is_tile

B, TILE, OFFSET, COUNT = 3, 8, 16, 32
WITH, PLAIN = valid_call(B, TILE, OFFSET, COUNT), valid_call(B)


def _dense(call, name, shape):
    return changed(call, name, shape=shape, strides=dense_strides(shape))


def rows():
    return {f"b={b}{' with metadata' if m else ''}": valid_call(b, *((TILE, OFFSET, COUNT) if m else ()))
            for b in (0, *range(1, MAX_TOKENS + 1), MAX_TOKENS + 1, 16) for m in (False, True)}


def dtypes():
    wrong = {"logits": (torch.float16, torch.bfloat16, torch.float64, torch.int32),
             "bias": (torch.float16, torch.float64, torch.int32),
             "ids": (torch.int64, torch.int16, torch.float32, torch.uint32),
             "weights": (torch.float16, torch.float64, torch.int32),
             "metadata": (torch.int64, torch.int16, torch.float32, torch.uint32)}
    return {f"{n} {d}": changed(WITH, n, dtype=d) for n, ds in wrong.items() for d in ds}


def shapes():
    table = {"logits": [(B, EXPERTS - 1), (B, EXPERTS + 1), (EXPERTS,), (1, B, EXPERTS)],
             "bias": [(EXPERTS - 1,), (EXPERTS + 1,), (1, EXPERTS)],
             "ids": [(B, TOP_K - 1), (B, TOP_K + 1), (B + 1, TOP_K), (B - 1, TOP_K), (B * TOP_K,), (TOP_K, B)],
             "weights": [(B, TOP_K - 1), (B + 1, TOP_K), (B - 1, TOP_K), (B * TOP_K,)],
             "metadata": [(1, metadata_size(TILE)), (metadata_size(TILE), 1)]}
    return {f"{n} {list(s)}": _dense(WITH, n, s) for n, ss in table.items() for s in ss}


def strides():
    cases = {f"logits row stride {s}": changed(WITH, "logits", strides=(s, 1))
             for s in (0, 4, 8, *range(EXPERTS - 4, EXPERTS + 9), 2 * EXPERTS)}
    cases["logits expanded over 8 rows"] = changed(valid_call(MAX_TOKENS), "logits", strides=(0, 1))
    cases["logits b=1 row stride 4"] = changed(valid_call(1), "logits", strides=(4, 1))
    cases["logits b=1 row stride 258"] = changed(valid_call(1), "logits", strides=(258, 1))
    cases["logits column stride 2"] = changed(WITH, "logits", strides=(2 * EXPERTS, 2))
    cases["logits column stride 0"] = changed(WITH, "logits", strides=(EXPERTS, 0))
    cases["logits transposed"] = changed(WITH, "logits", strides=(1, B))
    for s in (0, 2, EXPERTS):
        cases[f"bias stride {s}"] = changed(WITH, "bias", strides=(s,))
    for n in ("ids", "weights"):
        for s in ((TOP_K + 1, 1), (2 * TOP_K, 1), (0, 1), (1, B), (2 * TOP_K, 2), (TOP_K, 0)):
            cases[f"{n} strides {s}"] = changed(WITH, n, strides=s)
        for s in (3, 0, 64):  # the stride of a dimension of size 1 is free
            cases[f"{n} b=1 row stride {s}"] = changed(valid_call(1, TILE, OFFSET, COUNT), n, strides=(s, 1))
    for s in (0, 2, 4):
        cases[f"metadata stride {s}"] = changed(WITH, "metadata", strides=(s,))
    return cases


def alignment(cuda):
    cases = {}
    for n in TENSORS:
        step = element_size(getattr(WITH, n).dtype) if cuda else 1
        for r in range(0, 32, step):
            cases[f"{n} +{r} bytes"] = with_residue(WITH, n, r)
    return cases


def metadata():
    size = metadata_size(TILE)
    cases = {f"{n} elements": changed(WITH, "metadata", shape=(n,), strides=(1,))
             for n in (0, 1, size - 2, size - 1, size, size + 1, size + 36)}
    cases["metadata None, the request's scalars kept"] = replace(WITH, metadata=None)
    for name in ("local_expert_offset", "num_local_experts", "tile_n"):
        for value in (1, EXPERTS, -1, True, False, None, "0", 0.0, -0.0, np.int64(0)):
            cases[f"no metadata, {name}={value!r}"] = replace(PLAIN, **{name: value})
    return cases


def tiles():
    cases = {}
    for tile in (0, 1, 2, 7, 8, 9, 100, MAX_TILE - 1, MAX_TILE, MAX_TILE + 1, -1, True, 8.0, np.int64(8),
                 np.int32(MAX_TILE), None, "8"):
        call = replace(WITH, tile_n=tile)
        cases[f"tile_n={tile!r}"] = changed(call, "metadata", shape=(metadata_size(int(tile)),)) if is_tile(tile) \
            else call
    return cases


def local_ranges():
    pairs = [(-1, 8), (0, 0), (0, EXPERTS), (0, EXPERTS + 1), (EXPERTS, 0), (EXPERTS, 1), (EXPERTS + 1, 0),
             (EXPERTS - 1, 1), (EXPERTS - 1, 2), (200, 56), (200, 57), (0, -1), (16.0, 8), (np.int64(16), 8),
             (True, 8), (16, False), (16, np.int16(8)), (16, 8.0), (np.uint8(16), np.uint8(8)), (np.int8(16), 8),
             (np.uint8(EXPERTS - 1), np.uint8(1)), (np.uint8(EXPERTS - 1), np.uint8(2))]
    return {f"local range ({o!r}, {c!r})": replace(WITH, local_expert_offset=o, num_local_experts=c) for o, c in pairs}


def scales():
    below = float(np.nextafter(F32_OVERFLOW, 0))
    values = [0.0, -0.0, 2.5, -2.5, 1e-45, float("nan"), float("inf"), -float("inf"), F32_OVERFLOW, -F32_OVERFLOW,
              below, -below, 2 ** 128, 2 ** 127, 10 ** 400, -10 ** 400, 7, 0, True, False, np.float32(2.5),
              np.float64(-0.0), np.float16(1.5), np.int64(3), np.bool_(True), np.float32("nan"), Fraction(5, 2),
              "2.5", None, 1j]
    return {f"scale {type(v).__name__}({v!r})": replace(WITH, scale=v) for v in values}


def renormalizes():
    return {f"renormalize {type(v).__name__}({v!r})": replace(WITH, renormalize=v)
            for v in (True, False, 1, 0, np.bool_(True), None, "yes")}


def not_tensors():
    return {f"{n} a {k}": replace(WITH, **{n: v}) for n in TENSORS for k, v in NOT_TENSORS.items()}


def not_dense():
    return {f"{n} {form}": changed(WITH, n, form=form) for n in TENSORS for form in FORMS}


def overlaps():
    """Each output against each other tensor: touching it from before and after (valid), one element over
    either end, the same start, inside."""
    cases = {}
    for name in OUTPUTS:
        mine = getattr(WITH, name)
        size = ALIGN[name]  # steps that keep the output aligned, so its overlap is what is refused
        if name == "metadata":
            mine = replace(mine, shape=(-(-mine.extent() // size) * size // element_size(mine.dtype),))
        for other in TENSORS:
            if other == name:
                continue
            theirs = getattr(WITH, other)
            for label, delta in (("touching before", -mine.extent()), ("one element before", size - mine.extent()),
                                 ("same start", 0), ("inside", theirs.extent() // 2 // size * size),
                                 ("one element after", theirs.extent() - size), ("touching after", theirs.extent())):
                cases[f"{name} {label} {other}"] = over(WITH, name, other, delta // size * size)
    cases["bias inside logits (inputs may share)"] = over(WITH, "bias", "logits", 1024)
    return cases


def devices():
    everything = replace(WITH, **{n: replace(p, on_cpu=True) for n, p in WITH.placed().items()})
    cases = {f"{n} on the CPU": changed(WITH, n, on_cpu=True) for n in TENSORS}
    cases["every tensor on the CPU"] = everything
    for n in TENSORS:  # another clause broken too: the device is checked last
        cases[f"{n} +4 bytes, weights on the CPU"] = with_residue(changed(WITH, "weights", on_cpu=True), n, 4)
    cases["metadata one short, ids on the CPU"] = changed(changed(WITH, "ids", on_cpu=True), "metadata",
                                                          shape=(metadata_size(TILE) - 1,))
    return cases


def valid():
    return {"with metadata": WITH, "plain": PLAIN, "renormalize off": replace(WITH, renormalize=False),
            "every b, tile 1": valid_call(MAX_TOKENS, 1, 0, EXPERTS), "tile 256, one local": valid_call(1, 256, 255, 1)}


def targeted(cuda=False):
    """{group: {label: Call}} (the device group on a GPU only: on the CPU every tensor is on the CPU)."""
    groups = {"valid": valid(), "rows": rows(), "dtype": dtypes(), "shape": shapes(), "strides": strides(),
              "alignment": alignment(cuda), "metadata": metadata(), "tile": tiles(), "local range": local_ranges(),
              "scale": scales(), "renormalize": renormalizes(), "not a tensor": not_tensors(),
              "not dense": not_dense(), "overlap": overlaps()}
    if cuda:
        groups["device"] = devices()
    return groups
