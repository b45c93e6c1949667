"""A route call through route's torch op (``torch.ops.musespark.route``, kernel/op.py) on fake CUDA tensors, as
torch.compile traces it, against the contract's predicate without its address clauses.

The op's fake implementation must refuse a call exactly as the predicate does with ``addresses=False`` (a
ValueError of one line naming the argument, its text holding the clause's word) and accept every other call:
those valid, and those refused only for an alignment or an overlap, which a tensor without memory cannot break.
A Call's tensors are views of one fake CUDA arena at the call's own offsets, so the addresses they report are the
call's: a fake that read them would refuse a misaligned or an overlapping call. Only the calls the op takes as
route does are made (``fakeable``).
"""

import functools

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import kernel.op  # noqa: F401  (registers torch.ops.musespark.route)
from properties.contract.calls import ARGUMENTS, arena_bytes, element_size, make
from properties.contract.check import misjudged
from properties.contract.predicate import judge

DEVICE = "cuda"  # a fake CUDA device: no CUDA needed


@functools.cache
def _mode():
    return FakeTensorMode()


def fakeable(call):
    """The op hands the call to route unchanged, and it can be made of fake CUDA tensors: the tensor arguments
    tensors (metadata or None), every scalar of the type the op's schema declares (a float scale, a bool
    renormalize, ints not bools: the dispatcher converts or refuses any other before route sees it), every tensor
    dense, on the call's device and at a whole element of its dtype (a sparse or nested fake needs CUDA itself, a
    CUDA view starts on an element)."""
    placed = call.placed()
    scalars = (type(call.scale) is float and type(call.renormalize) is bool
               and all(type(getattr(call, n)) is int for n in ("local_expert_offset", "num_local_experts", "tile_n")))
    return scalars and {"logits", "bias", "ids", "weights"} <= set(placed) \
        and (call.metadata is None or "metadata" in placed) \
        and all(p.form == "dense" and not p.on_cpu and p.offset % element_size(p.dtype) == 0 for p in placed.values())


def _view(arena, placed):
    """The fake tensor ``placed`` describes in ``arena`` (a fake uint8 tensor; a fake's slice needs CUDA itself)."""
    return arena.view(placed.dtype).as_strided(placed.shape, placed.strides, placed.offset // placed.dtype.itemsize)


def expected(call):
    """The predicate's Verdict on ``call`` without the address clauses, judged on its CPU tensors; a refusal for
    the device alone is a valid call on one fake CUDA device."""
    verdict = judge(**make(call, "cpu").arguments, addresses=False)
    return None if verdict.valid or verdict.on_device else verdict


def breaches(call):
    """Where the op on ``call``'s fake CUDA tensors departs from ``expected``; [] when it honours it (or the call
    is not ``fakeable``)."""
    if not fakeable(call):
        return []
    verdict, size = expected(call), -(-arena_bytes(call) // 16) * 16  # (no tensor made in the mode but fakes)
    raised = None
    with _mode():
        arena = torch.empty(size, dtype=torch.uint8, device=DEVICE)
        arguments = {name: _view(arena, value) if name in call.placed() else value
                     for name, value in ((n, getattr(call, n)) for n in ARGUMENTS)}
        try:
            torch.ops.musespark.route(**arguments)
        except ValueError as refusal:
            raised = str(refusal)
        except Exception as error:  # anything else breaks the contract: bad input is a ValueError
            return [f"the op's fake raised {type(error).__name__}, not ValueError: {error}"]
    if verdict is None:
        return [] if raised is None else [f"the op's fake refused a call it must accept: {raised}"]
    return [f"the op's fake {line}" for line in misjudged(verdict, raised)]
