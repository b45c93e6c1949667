"""The checked-call cache cannot be fooled: twins of a valid call, each differing from it in one thing the
predicate reads (predicate.READS of each tensor, predicate.SCALAR_READS of each scalar), at the same
addresses where the thing is not the address.

``signature_breaches()`` (CPU): no twin shares kernel.contract.signature's key with the valid call.
``capacity_breaches()``: the cache keeps every one of CACHE_LIMIT signatures, then starts afresh.
``cache_breaches(device, ...)`` (GPU): the valid call, then the valid call again (it must not be checked
again: the cache holds it), then the twin, which must be checked again and must fare as the predicate says
(refused, naming the argument, with no byte changed; or bit-exact against the model).
"""

import contextlib
from dataclasses import dataclass, replace

import numpy as np
import torch

from kernel import contract, routing
from kernel.layout import EXPERTS, TOP_K, metadata_size
from properties.contract.calls import arenas_for, make
from properties.contract.check import made_breaches
from properties.contract.edges import B, COUNT, OFFSET, TILE
from properties.contract.edges import WITH as BASE
from properties.contract.predicate import DEVICE, READS, SCALAR_READS


class Lookalike:
    """Answers everything a tensor is asked by the signature as ``tensor`` does, and is no tensor."""

    def __init__(self, tensor):
        self.data_ptr, self.stride, self.element_size = tensor.data_ptr, tensor.stride, tensor.element_size
        self.shape, self.dtype, self.device = tensor.shape, tensor.dtype, tensor.device
        self.is_contiguous, self.dim, self.numel = tensor.is_contiguous, tensor.dim, tensor.numel


class Claimed(torch.Tensor):
    """A CPU tensor that says it is on device ``claimed``: the CPU holds one device, so the device alone is
    changed this way; the valid call's tensor is a Claimed too (claiming the CPU), so the types are equal."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    @property
    def device(self):
        return self.claimed


def claim(tensor, device):
    claimed = tensor.as_subclass(Claimed)
    claimed.claimed = torch.device(device)
    return claimed


@dataclass(frozen=True)
class Twin:
    """The valid call ``base`` and its twin differing in ``argument``'s ``attribute``: ``call`` (its Call) and
    ``wrap`` (applied to the made twin's value of ``argument``; None: as made)."""

    argument: str
    attribute: str
    base: object
    call: object
    wrap: object = None


def _tensor_twins():
    p = BASE.placed()
    other = {"logits": "int32", "bias": "int32", "ids": "float32", "weights": "int32", "metadata": "float32"}
    narrower = {"logits": torch.float16, "bias": torch.float16, "ids": torch.int16, "weights": torch.float16,
                "metadata": torch.int16}
    moved = {"logits": p["logits"].offset + 4, "bias": p["bias"].offset + 4, "metadata": p["metadata"].offset + 4,
             "ids": p["weights"].offset, "weights": p["ids"].offset}  # misaligned, or onto the other output
    shapes = {"logits": (B, EXPERTS - 1), "bias": (EXPERTS - 1,), "ids": (B, TOP_K - 1), "weights": (B, TOP_K - 1),
              "metadata": (metadata_size(TILE) - 1,)}
    strides = {"logits": (EXPERTS + 2, 1), "bias": (2,), "ids": (TOP_K + 1, 1), "weights": (TOP_K + 1, 1),
               "metadata": (2,)}
    twins = []
    for name, placed in p.items():
        def twin(attribute, wrap=None, **fields):
            return Twin(name, attribute, BASE, replace(BASE, **{name: replace(placed, **fields)}), wrap)

        twins += [twin("type", wrap=Lookalike), twin("address", offset=moved[name]),
                  twin("shape", shape=shapes[name]), twin("strides", strides=strides[name]),
                  twin("dtype", dtype=getattr(torch, other[name])), twin("element_size", dtype=narrower[name]),
                  twin(DEVICE, on_cpu=True)]
    return twins


def _scalar_twins():
    def twin(argument, attribute, value, base=BASE):
        return Twin(argument, attribute, base, replace(base, **{argument: value}))

    zero = replace(BASE, scale=0.0)
    return [twin("scale", "type", np.float32(BASE.scale)),
            twin("scale", "value", 1e39), twin("scale", "sign of zero", -0.0, zero),
            twin("renormalize", "type", 1), twin("renormalize", "value", False),
            twin("local_expert_offset", "type", float(OFFSET)), twin("local_expert_offset", "value", EXPERTS + 1),
            twin("num_local_experts", "type", float(COUNT)),
            twin("num_local_experts", "value", EXPERTS - OFFSET + 1),
            twin("tile_n", "type", float(TILE)), twin("tile_n", "value", TILE + 1),
            twin("metadata", "presence", None)]


def twins():
    """Every twin: each tensor's READS, each scalar's SCALAR_READS that apply to it (the sign of zero: scale's)."""
    return _tensor_twins() + _scalar_twins()


def coverage_gaps():
    """(argument, attribute) pairs the predicate reads that no twin changes."""
    have = {(t.argument, t.attribute) for t in twins()}
    want = {(n, a) for n in BASE.placed() for a in READS}
    want |= {(n, a) for n in ("scale", "renormalize", "local_expert_offset", "num_local_experts", "tile_n")
             for a in SCALAR_READS if a != "sign of zero" or n == "scale"}
    return sorted(want - have)


def _made_base(twin, device):
    """The twin's valid call made in arenas large enough for both."""
    return make(twin.base, device, arenas=arenas_for([twin.base, twin.call], device))


def _made_twin(twin, base, device):
    """The twin made (its outputs poisoned again) in ``base``'s arenas, its argument wrapped."""
    other = make(twin.call, device, arenas=base.arenas)
    if twin.wrap is not None:
        other.arguments[twin.argument] = twin.wrap(other.arguments[twin.argument])
    return other


def signature_breaches():
    """CPU: one line per twin whose signature equals its valid call's, or whose valid call has no signature
    or another one when made again (new tensors of the same attributes)."""
    lines = []
    for twin in twins():
        base = _made_base(twin, "cpu")
        again = make(twin.base, "cpu", arenas=base.arenas)
        if twin.attribute == DEVICE:  # the valid call's tensor claiming the CPU, then another device
            other = make(twin.base, "cpu", arenas=base.arenas)
            for made, where in ((base, "cpu"), (again, "cpu"), (other, "cuda:0")):
                made.arguments[twin.argument] = claim(made.arguments[twin.argument], where)
        else:
            other = _made_twin(twin, base, "cpu")
        key = contract.signature(**base.arguments)
        if key is None or key != contract.signature(**again.arguments):
            lines.append(f"{twin.argument} {twin.attribute}: the valid call has no stable signature ({key})")
        elif key == contract.signature(**other.arguments):
            lines.append(f"{twin.argument} {twin.attribute}: the twin shares the valid call's signature")
    return lines


def capacity_breaches():
    """Lines for each way the checked-call cache fails to be one: a call with no signature kept, one of
    CACHE_LIMIT signatures lost, or the cache not starting afresh at the next one."""
    cache = contract.CheckedCalls()
    cache.add(None, "no signature")
    lines = [] if cache.get(None) is None else ["a call with no signature was kept"]
    keys = [("signature", i) for i in range(contract.CACHE_LIMIT)]
    for key in keys:
        cache.add(key, key)
    lost = [key for key in keys if cache.get(key) != key]
    if lost:
        lines.append(f"of {contract.CACHE_LIMIT} signatures the cache lost {len(lost)} (the first {lost[0]})")
    cache.add(("one more",), "one more")
    if cache.get(keys[0]) is not None or cache.get(("one more",)) != "one more":
        lines.append(f"the cache did not start afresh with its signature {contract.CACHE_LIMIT + 1}")
    return lines


@contextlib.contextmanager
def counted_checks():
    """A fresh cache of checked calls and a count of contract.check_arguments calls (a list of one int)."""
    count, checks, cache = [0], contract.check_arguments, routing.checked_calls

    def counting(*args):
        count[0] += 1
        return checks(*args)

    contract.check_arguments, routing.checked_calls = counting, contract.CheckedCalls()
    try:
        yield count
    finally:
        contract.check_arguments, routing.checked_calls = checks, cache


def cache_breaches(device, synchronize, selected=None):
    """GPU: one line per twin (of ``selected``, default all) the cache let through unchecked, or that fared
    otherwise than the predicate says."""
    lines = []
    for twin in twins() if selected is None else selected:
        with counted_checks() as count:
            base = _made_base(twin, device)
            where = f"{twin.argument} {twin.attribute}"
            first = made_breaches(base, device, routing.route, synchronize)
            checked = count[0]
            routing.route(**base.arguments)
            synchronize()
            if first or count[0] != checked:
                lines.append(f"{where}: the valid call {first or 'was checked again: the cache did not keep it'}")
                continue
            other = _made_twin(twin, base, device)
            lines += [f"{where}: {line}" for line in made_breaches(other, device, routing.route, synchronize)]
            if count[0] != checked + 1:
                lines.append(f"{where}: the twin was not checked (the cache took it for the valid call)")
    return lines
