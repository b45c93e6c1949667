"""One route call against the contract's predicate: what route must have done, and what it did.

Refused (the predicate says invalid): route raises a ValueError of one line, ``route: <name> ...``, naming the
argument the predicate names, its text saying the clause broken (``CLAUSE_WORDS``), and no byte of any arena
changes.
Valid: route raises nothing and the arenas read afterwards exactly what they read before with the model's
ids, weights and metadata (oracles.numpy_model) written into the outputs' elements: every other byte, the
metadata's guard element and the slack past it included, keeps its poison.
"""

import numpy as np
import torch

import oracles.numpy_model as model
from kernel.layout import metadata_size
from properties.contract.calls import make, view
from properties.contract.predicate import judge
from properties.engine.poison import METADATA_POISON

# The word of route's message that says which clause a refusal is for.
CLAUSE_WORDS = {"tensor": "torch.Tensor", "layout": "strided", "rows": "rows", "dtype": "dtype", "shape": "shape",
                "strides": "stride",
                "contiguous": "contiguous", "alignment": "aligned", "real": "real number", "finite": "finite",
                "bool": "bool", "without metadata": "without", "range": "int in", "size": "metadata_size",
                "overlap": "alias", "device": "device"}


def expected(made, before, kind):
    """The bytes arena ``kind`` must hold after a valid call: ``before`` with the model's outputs written."""
    arguments = made.arguments
    logits, bias = (np.ascontiguousarray(arguments[n].cpu().numpy()) for n in ("logits", "bias"))
    scale = np.float32(arguments["scale"])
    ids, weights = model.route(logits, bias, scale, arguments["renormalize"])
    want = before[kind].copy()
    arena = torch.from_numpy(want)
    placed = made.call.placed()
    view(arena, placed["ids"]).copy_(torch.from_numpy(ids))
    view(arena, placed["weights"]).copy_(torch.from_numpy(weights))
    if arguments["metadata"] is not None:
        tile = int(arguments["tile_n"])
        meta = model.routing_metadata(ids, int(arguments["local_expert_offset"]),
                                      int(arguments["num_local_experts"]), tile, fill=METADATA_POISON)
        view(arena, placed["metadata"])[:metadata_size(tile)].copy_(torch.from_numpy(meta))
    return want


def _changed(made, before, after):
    """Lines naming the first bytes that differ, and the tensors holding them."""
    lines = []
    for kind in before:
        where = np.flatnonzero(before[kind] != after[kind])
        if where.size:
            holders = sorted({n for n, p in made.call.placed().items() if (p.on_cpu == (kind == "cpu"))
                              and any(p.offset <= i < p.end() for i in where[:64])})
            lines.append(f"{where.size} bytes of the {kind} arena changed, from byte {where[0]} "
                         f"({before[kind][where[0]]:#04x} -> {after[kind][where[0]]:#04x}); in the span of "
                         f"{', '.join(holders) or 'no tensor'}")
    return lines


def breaches(call, device, route, seed=0, synchronize=lambda: None):
    """Where ``route`` on ``call``'s tensors (made on ``device``) departs from the predicate; empty when it
    honours it."""
    return made_breaches(make(call, device, seed), device, route, synchronize)


def made_breaches(made, device, route, synchronize=lambda: None):
    """``breaches`` of a call already made (Made)."""
    verdict = judge(**made.arguments)
    before = made.snapshot()
    raised = None
    try:
        route(**made.arguments)
        synchronize()
    except ValueError as refusal:
        raised = str(refusal)
    except Exception as error:  # anything else breaks the contract: bad input is a ValueError
        return [f"route raised {type(error).__name__}, not ValueError: {error}"]
    after = made.snapshot()
    if verdict.valid:
        if raised is not None:
            return [f"refused a valid call: {raised}"]
        kind = torch.device(device).type
        want = {k: expected(made, before, k) if k == kind else v for k, v in before.items()}
        return _changed(made, want, after)
    return misjudged(verdict, raised) + _changed(made, before, after)


def misjudged(verdict, raised):
    """A line where ``raised`` (a ValueError's message, or None when the call passed) is not what ``verdict`` (an
    invalid call's) asks for: a refusal of one line, ``route: <name> ...``, holding its clause's word; else []."""
    want = f"route: {verdict.name} "
    if raised is None:
        return [f"accepted a call the contract refuses ({verdict.name}: {verdict.clause})"]
    if not raised.startswith(want) or CLAUSE_WORDS[verdict.clause] not in raised or "\n" in raised:
        return [f"refused as {raised!r}; the contract refuses {verdict.name} for its {verdict.clause} "
                f"({want}... {CLAUSE_WORDS[verdict.clause]!r})"]
    return []
