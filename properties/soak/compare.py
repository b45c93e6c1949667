"""Bitwise comparison on the device (only the indices of disagreeing problems reach the host), one problem
of a batch as the harness's case and outputs, and the cross-check of the model on the device against the
NumPy model on the CPU."""

import numpy as np
import torch

from kernel.layout import metadata_size
from oracles.numpy_model import route as numpy_route
from oracles.numpy_model import routing_metadata as numpy_routing_metadata
from properties.engine.cases import Outputs, RoutingCase
from properties.engine.compare import describe, disagreements
from properties.engine.poison import METADATA_POISON
from properties.engine.references import REFERENCES
from properties.soak.impls import FIELDS


class ModelMismatch(RuntimeError):
    """The model on the device and the NumPy model on the CPU differ: the reference cannot be trusted."""


def bits(x):
    """``x`` as its bit patterns: float32 viewed as int32, integers as they are."""
    return x.view(torch.int32) if x.dtype == torch.float32 else x


def differing(got, want):
    """bool [P] on the device: problems ``got`` was called on where any produced field differs from ``want``
    in any bit."""
    bad = None
    for field in FIELDS:
        value = getattr(got, field)
        if value is None:
            continue
        differs = (bits(value) != bits(getattr(want, field))).reshape(value.shape[0], -1).any(1)
        bad = differs if bad is None else bad | differs
    return bad if bad is None or got.called is None else bad & got.called


def disagreeing_problems(got, want):
    """Host list of the problems where ``got`` differs from ``want`` (one small transfer)."""
    bad = differing(got, want)
    return [] if bad is None else bad.nonzero().flatten().tolist()


def problem_case(batch, p, rows=None):
    """Problem ``p`` of ``batch`` (its rows ``rows``, default all) as the harness's RoutingCase."""
    plan = batch.plan
    logits = batch.logits[p] if rows is None else batch.logits[p, rows]
    metadata = plan.tile_n is not None
    return RoutingCase(logits=np.ascontiguousarray(logits.cpu().numpy()), bias=batch.bias[p].cpu().numpy(),
                       scale=np.float32(plan.scale[p]), renormalize=bool(plan.renormalize[p]), tile_n=plan.tile_n,
                       local_expert_offset=int(plan.offset[p]) if metadata else 0,
                       num_local_experts=int(plan.count[p]) if metadata else 0, generator=plan.family_of(p))


def problem_outputs(out, p, tile_n):
    """Problem ``p`` of BatchOutputs ``out`` as host Outputs; metadata cut to metadata_size(tile_n)."""
    def host(x):
        return None if x is None else x[p].cpu().numpy()
    meta = host(out.metadata)
    return Outputs(host(out.ids), host(out.weights), None if meta is None else meta[:metadata_size(tile_n)])


def numpy_outputs(case, reference=None):
    """The NumPy form's Outputs of ``case`` on the CPU of ``reference`` (a name of REFERENCES; None: the
    Muse Spark model's public route), metadata filled with the poison."""
    if reference is None:
        ids, weights = numpy_route(case.logits, case.bias, case.scale, case.renormalize)
    else:
        with np.errstate(all="ignore"):
            ids, weights = REFERENCES[reference](case.logits, case.bias, np.float32(case.scale),
                                                            bool(case.renormalize))
    meta = None if case.tile_n is None else numpy_routing_metadata(
        ids, case.local_expert_offset, case.num_local_experts, case.tile_n, fill=METADATA_POISON)
    return Outputs(ids, weights, meta)


def cross_check(batch, reference, problems, name=None):
    """Compare the device reference's outputs (``reference``; ``name`` its name, None: the Muse Spark model)
    of ``problems`` with its NumPy form's on the CPU; returns the rows checked. Raises ModelMismatch, naming
    the problem and the difference, when any bit differs."""
    tile = batch.plan.tile_n
    for p in problems:
        case = problem_case(batch, p)
        found = disagreements({"numpy": numpy_outputs(case, name), "device": problem_outputs(reference, p, tile)},
                              reference="numpy")
        if found:
            raise ModelMismatch(f"the {name or 'model'} on {batch.logits.device} differs from its NumPy form on a "
                                f"{case.generator} problem (plan {batch.plan.index}, batch {batch.index}, "
                                f"problem {p}): " + "; ".join(describe(d) for d in found))
    return len(problems) * batch.plan.b


def sample(problems, count, batch_index):
    """``count`` problems spread over ``problems``, shifted from batch to batch."""
    if count <= 0:
        return []
    step = max(1, problems // count)
    return sorted({(batch_index + i * step) % problems for i in range(min(count, problems))})
