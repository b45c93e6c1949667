"""A disagreement becomes a replayable case file of corpora/: the problem, minimised to one row where one
row alone still disagrees, with the reference's and the implementation's outputs and where it came from."""

import dataclasses
import hashlib
import json
import time

import numpy as np

from properties.soak.adapter import REFERENCE, disagreements
from properties.soak.compare import disagreeing_problems, problem_case, problem_outputs
from properties.soak.impls import run_model
from properties.soak.plan import Batch, Plan


@dataclasses.dataclass(frozen=True)
class Failure:
    """One disagreement, picklable (gathered across ranks), written by rank 0."""

    name: str
    implementation: str
    case: object
    outputs: dict
    found: list
    origin: dict


def _one_row(batch, p, row):
    """Problem ``p``'s row ``row`` alone, as a batch of one problem of one row."""
    plan = batch.plan
    take = lambda x: x[p:p + 1].copy()
    sub = Plan(plan.seed, plan.index, 1, plan.tile_n, ((plan.family_of(p), 0, 1),), take(plan.scale),
               take(plan.renormalize), take(plan.offset), take(plan.count))
    return Batch(sub, batch.index, batch.logits[p:p + 1, row:row + 1].contiguous(), batch.bias[p:p + 1],
                 batch.scale[p:p + 1], batch.renormalize[p:p + 1], batch.offset[p:p + 1], batch.count[p:p + 1])


def _minimal(impl, batch, reference, got, p):
    """(batch, problem, row or None, reference, got): the first row of problem ``p`` that disagrees alone as
    a batch of its own, else problem ``p`` of ``batch`` whole."""
    for row in range(batch.plan.b if batch.plan.b > 1 else 0):
        sub = _one_row(batch, p, row)
        sub_reference = run_model(sub)
        sub_got = impl.enqueue(sub, sub_reference)
        if disagreeing_problems(sub_got, sub_reference):
            return sub, 0, row, sub_reference, sub_got
    return batch, p, None, reference, got


def failure(impl, batch, reference, got, p, rank, minimise=True):
    """The Failure of ``impl`` on problem ``p`` of ``batch`` (``got`` its outputs, ``reference`` the model's)."""
    origin = {"soak": {"seed": batch.plan.seed, "plan": batch.plan.index, "batch": batch.index, "problem": p,
                       "b": batch.plan.b, "rank": rank}}
    source, q, row, reference, got = (_minimal(impl, batch, reference, got, p) if minimise
                                      else (batch, p, None, reference, got))
    if row is not None:
        origin["soak"]["row"] = row
    tile = source.plan.tile_n
    case = problem_case(source, q)
    outputs = {REFERENCE: problem_outputs(reference, q, tile), impl.name: problem_outputs(got, q, tile)}
    found = disagreements(outputs, reference=REFERENCE)
    if not found:  # the difference lies in the metadata buffer's padding, past metadata_size(tile_n)
        found = [{"implementation": impl.name, "reference": REFERENCE, "field": "metadata", "count": None,
                  "first": [], "note": "writes past metadata_size(tile_n)"}]
    digest = hashlib.sha256(json.dumps([case.logits.view(np.uint32).tolist(), case.bias.view(np.uint32).tolist(),
                                        origin], sort_keys=True).encode()).hexdigest()[:12]
    name = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-soak-{impl.name}-{case.generator}-{digest}.json"
    return Failure(name, impl.name, case, outputs, found, origin)
