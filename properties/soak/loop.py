"""The soak loop: rank r of w runs batches offset + r, offset + w + r, ...; each batch is drawn on the
device, run through the model and every implementation under test, compared bit for bit on the device and
partly cross-checked against the NumPy model on the CPU. Batches overlap (properties/soak/schedule.py): each
step enqueues one batch and retires the oldest once ``depth`` are in flight. After each step the ranks sum
their counts, decide together whether to stop enqueuing, and hand any disagreements to rank 0, which writes
them as case files; every batch enqueued is retired before the run ends."""

import dataclasses
import hashlib
import json
import time
from pathlib import Path

import numpy as np

from properties.engine import casefile
from properties.engine import implementations as registry
from properties.soak import dist
from properties.engine.builtins import FAULT_PREFIX
from properties.engine.compare import REFERENCE, disagreements
from properties.engine.implementations import REGISTRY
from properties.engine.plugins import NotRun
from properties.engine.references import REFERENCES
from properties.soak.compare import ModelMismatch, disagreeing_problems, problem_case, problem_outputs
from properties.soak.graphed import Draws
from properties.soak import verdict
from properties.soak.impls import FIELDS, Model, run_model
from properties.soak.plan import Batch, Plan, Plans, Space
from properties.soak.schedule import Pipeline, check_as_written, cross_check_flight, disagreeing
from properties.soak.summary import SUMMARY_FORMAT, Progress, Tally, describe_device, provenance, write_summary

SAVED_PER_BATCH = 2  # case files per implementation and batch; every disagreement is counted


@dataclasses.dataclass(frozen=True)
class Config:
    """A soak run. ``rows``: stop once the run (with ``previous``) has this many rows; ``seconds``: stop after
    this long; ``implementations``: names in the registry (properties/engine/implementations.py: built-ins
    and the plug-ins added there); ``faults``: planted faults (the registry's "fault-NAME");
    ``crosscheck``: problems per batch compared with the NumPy model; ``previous``: the summary resumed;
    ``depth``: batches on the device at once (properties/soak/schedule.py); ``compile_model``: the model's
    ids and weights through torch.compile on a CUDA device (properties/soak/impls.py); ``graph_stages``: each
    plan's draw and model replayed from CUDA graphs on a CUDA device (properties/soak/graphed.py);
    ``checkpoint``: where rank 0 writes the summary of the batches retired so far, every ``checkpoint_seconds``
    (a resumable summary on disk whatever ends the process)."""

    seed: int = 0
    offset: int = 0
    rows: int | None = None
    seconds: float | None = None
    space: Space = Space()
    implementations: tuple = ()
    faults: tuple = ()
    stop_on_failure: bool = False
    minimise: bool = True
    crosscheck: int = 4
    max_case_files: int = 100
    failures_dir: Path = Path("corpora/failures")
    progress: bool = True
    previous: dict | None = None
    depth: int = 3
    compile_model: bool = True
    graph_stages: bool = True
    checkpoint: Path | None = None
    checkpoint_seconds: float = 60.0


def under_test(config):
    """Names of the implementations under test, each in the registry and able to run here; ValueError for an
    unknown name, NotRun (one line) for one that cannot run here."""
    names = list(config.implementations) + [FAULT_PREFIX + fault for fault in config.faults]
    for name in names:
        if name not in REGISTRY:
            known = [*registry.GPU, *registry.plugin_names()]
            raise ValueError(f"implementation must be one of {known} or NAME=MODULE:ATTR, got {name!r}")
        reason = REGISTRY[name].unavailable()
        if reason is not None:
            raise NotRun(name, reason)
    return names


def implementations(config):
    """The implementations under test, from the registry, each through properties/soak/launches.py."""
    from properties.soak.launches import Launched

    return [Launched(REGISTRY[name]) for name in under_test(config)]


def save_case(directory, name, case, outputs, found, origin, references=None):
    """Write a case file (casefile format) to ``directory/name`` (``references``: name -> its reference, as
    casefile.recording keeps them); returns its path."""
    record = casefile.CaseFile(case, outputs, casefile.recording(outputs, references), origin, found)
    return casefile.write(directory / name, record)


# A disagreement becomes a replayable case file of corpora/: the problem, minimised to one row where one row
# alone still disagrees, with the reference's and the implementation's outputs and where it came from.


@dataclasses.dataclass(frozen=True)
class Failure:
    """One disagreement, picklable (gathered across ranks), written by rank 0."""

    name: str
    implementation: str
    reference: str
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
        sub_reference = run_model(sub, REFERENCES[impl.impl.reference])
        try:
            sub_got = impl.enqueue(sub, sub_reference)
        except NotRun:  # a plug-in that fails on one row: the problem is saved whole
            break
        if disagreeing_problems(sub_got, sub_reference):
            return sub, 0, row, sub_reference, sub_got
    return batch, p, None, reference, got


def failure(impl, batch, reference, got, p, rank, minimise=True):
    """The Failure of ``impl`` on problem ``p`` of ``batch`` (``got`` its outputs, ``reference`` its
    reference's)."""
    origin = {"soak": {"seed": batch.plan.seed, "plan": batch.plan.index, "batch": batch.index, "problem": p,
                       "b": batch.plan.b, "rank": rank}}
    source, q, row, reference, got = (_minimal(impl, batch, reference, got, p) if minimise
                                      else (batch, p, None, reference, got))
    if row is not None:
        origin["soak"]["row"] = row
    tile = source.plan.tile_n
    case = problem_case(source, q)
    against = impl.impl.reference
    outputs = {against: problem_outputs(reference, q, tile), impl.name: problem_outputs(got, q, tile)}
    found = disagreements(outputs, reference=against)
    if not found:  # the difference lies in the metadata buffer's padding, past metadata_size(tile_n)
        found = [{"implementation": impl.name, "reference": against, "field": "metadata", "count": None,
                  "first": [], "note": "writes past metadata_size(tile_n)"}]
    digest = hashlib.sha256(json.dumps([case.logits.view(np.uint32).tolist(), case.bias.view(np.uint32).tolist(),
                                        origin], sort_keys=True).encode()).hexdigest()[:12]
    name = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-soak-{impl.name}-{case.generator}-{digest}.json"
    return Failure(name, impl.name, against, case, outputs, found, origin)


def _saved(plan, bad):
    """Up to SAVED_PER_BATCH of the disagreeing problems ``bad``, of as many families as possible."""
    firsts = {}
    for p in bad:
        firsts.setdefault(plan.family_of(p), p)
    return (list(firsts.values()) + [p for p in bad if p not in firsts.values()])[:SAVED_PER_BATCH]


def _write(config, failures, written, firsts):
    """Write the failures while room is left; ``firsts``: implementation|family -> its first case file."""
    room = max(0, config.max_case_files - len(written))
    paths = []
    for f in failures[:room]:
        paths.append(str(save_case(config.failures_dir, f.name, f.case, f.outputs, f.found, f.origin,
                                   {f.implementation: f.reference})))
        firsts.setdefault(verdict.key(f.implementation, f.case.generator), paths[-1])
    return paths


def _retire(ctx, config, pipeline, tally):
    """Retire the oldest batch in flight: (rows, failures, model mismatch message or None)."""
    flight = pipeline.retire()
    batch, plan, found = flight.batch, flight.batch.plan, []
    for impl in pipeline.impls:
        got, bad = flight.outputs[impl.name], disagreeing(flight, impl.name)
        want = flight.wants[impl.impl.reference]
        tally.disagreements[impl.name] += len(bad)
        if bad:
            verdict.count(tally, impl.name, plan, got, want)
            found += [failure(impl, batch, want, got, p, ctx.rank, config.minimise)
                      for p in _saved(plan, bad)]
        else:
            fields = [f for f in FIELDS if getattr(got, f) is not None]
            verdict.count_agreeing(tally, impl.name, plan, fields, flight.called[impl.name])
    tally.add_plan_batch(plan)
    try:
        check_as_written(flight)
        tally.crosscheck_rows += cross_check_flight(flight, config.crosscheck)
    except ModelMismatch as exc:
        return plan.rows, found, str(exc)
    return plan.rows, found, None


def _totals(ctx, tally):
    """The tallies of every rank merged."""
    totals = Tally()
    for part in dist.gather(ctx, tally):
        totals.merge(part)
    return totals


def run(config, ctx, interrupts=None):
    """Run the soak on this rank; returns the summary (the same on every rank). ``interrupts``
    (common/interrupts.py) is deferred once the loop starts; once it has a signal on any rank, no batch is enqueued and the ones in
    flight are retired: the summary (``interrupted``: the signal's name) covers exactly the batches retired,
    and its next_offset is the first batch not retired, so a resumed run verifies none twice. A plug-in whose
    code raises or exits (NotRun) ends the run the same way, ``not_run`` naming it and why."""
    impls = implementations(config)
    first = impls[0].impl.reference if impls else REFERENCE
    reference = Model.on(ctx.device, config.compile_model, config.graph_stages, reference=first)
    previous = Tally.from_json(config.previous["tally"]) if config.previous else Tally()
    plans, tally, written, mismatches = Plans(config.space, config.seed), Tally(), [], []
    firsts = dict((config.previous or {}).get("first_case_files", {}))
    pipeline = Pipeline(ctx.device, reference, impls, plans, config.depth,
                        draws=Draws(ctx.device, config.graph_stages))
    done = enqueued = previous.rows
    progress = Progress(config.progress and ctx.leader, config.rows, done)
    start, step, retired, checkpointed = time.monotonic(), 0, 0, time.monotonic()
    devices = dist.gather(ctx, describe_device(ctx.device))
    enqueuing = config.rows is None or done < config.rows
    interrupted, not_run = False, None
    if interrupts is not None:
        interrupts.defer()
    while enqueuing or pipeline.in_flight:
        rows_in = 0
        if enqueuing:
            try:
                rows_in = pipeline.enqueue(config.offset + step * ctx.world + ctx.rank).batch.plan.rows
                step += 1
            except NotRun as exc:  # a plug-in raised or exited: its outcome; the batches in flight still retire
                not_run = exc
        rows, found, mismatch = 0, [], None
        if pipeline.in_flight and (pipeline.full or not enqueuing):
            rows, found, mismatch = _retire(ctx, config, pipeline, tally)
            retired += 1
        out_of_time = config.seconds is not None and time.monotonic() - start >= config.seconds
        due = config.checkpoint is not None and time.monotonic() - checkpointed >= config.checkpoint_seconds
        signalled = interrupts is not None and interrupts.requested
        rows_in, rows, failures, timeouts, bad_model, due, signalled, stopped = dist.all_sum(
            ctx, [rows_in, rows, len(found), int(out_of_time), int(mismatch is not None), int(due), int(signalled),
                  int(not_run is not None)])
        done, enqueued = done + rows, enqueued + rows_in
        if failures or bad_model:
            gathered = dist.gather(ctx, (found, mismatch))
            if ctx.leader:
                written += _write(config, [f for fs, _ in gathered for f in fs], written, firsts)
            mismatches += [m for _, m in gathered if m]
        progress.update(rows, sum(tally.disagreements.values()))
        interrupted = interrupted or bool(signalled)
        enqueuing = enqueuing and not (timeouts or bad_model or (config.stop_on_failure and failures) or signalled
                                       or stopped or (config.rows is not None and enqueued >= config.rows))
        if due:
            partial = _summary(config, ctx, _totals(ctx, tally), previous, time.monotonic() - start, retired, written,
                               mismatches, devices, impls, firsts, pipeline)
            if ctx.leader:
                write_summary(config.checkpoint, partial)
            checkpointed = time.monotonic()
    progress.close()
    summary = _summary(config, ctx, _totals(ctx, tally), previous, time.monotonic() - start, retired, written,
                       mismatches, devices, impls, firsts, pipeline)
    if interrupted:
        summary["interrupted"] = interrupts.name or "a signal on another rank"
    if not_run is not None:
        summary["not_run"] = {not_run.name: not_run.reason}
    return summary


def _summary(config, ctx, totals, previous, elapsed, steps, written, mismatches, devices, impls, firsts, pipeline):
    cumulative = Tally().merge(previous).merge(totals)
    chunks = (config.previous or {}).get("chunks", []) + [{
        "offset": config.offset, "next_offset": config.offset + steps * ctx.world, "rows": totals.rows,
        "seconds": round(elapsed, 3), "rows_per_second": round(totals.rows / elapsed) if elapsed else None,
        "world_size": ctx.world, "backend": ctx.backend, "devices": devices, "depth": pipeline.depth,
        "model": pipeline.model.describe(), "draw": pipeline.draws.describe(),
        "references": {name: model.describe() for name, model in pipeline.models.items()},
        "branches": {impl.name: impl.branches for impl in impls}}]
    return {
        "format": SUMMARY_FORMAT,
        "seed": config.seed,
        "next_offset": config.offset + steps * ctx.world,
        "target_rows": config.rows,
        "done": config.rows is not None and cumulative.rows >= config.rows,
        "space": dataclasses.asdict(config.space),
        "reference": REFERENCE,
        "references": {impl.name: impl.impl.reference for impl in impls},
        "implementations": [impl.name for impl in impls],
        "sources": {impl.name: impl.impl.source for impl in impls},
        "eager": {impl.name: impl.eager for impl in impls if impl.eager},
        "this_run": {**chunks[-1], "tally": totals.to_json()},
        "tally": cumulative.to_json(),
        "case_files": (config.previous or {}).get("case_files", []) + written,
        "first_case_files": firsts,
        "model_mismatches": mismatches,
        "chunks": chunks,
        "provenance": provenance(devices),
    }
