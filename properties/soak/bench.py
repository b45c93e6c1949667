"""Throughput of the soak per implementation, variant and b: verified rows per second end to end through
the engine's pipeline (properties/soak/schedule.py: draw, model, implementation and comparison overlapped;
one plan, so its graphs are captured and the model compiled in a warm-up batch outside the timing), then each
stage alone on the host's stream, synchronised, and the overlap: the stages' sum over the pipelined time of a
batch (1: none; the slowest stage alone sets the rate when it equals sum / slowest)."""

import time

import torch

from properties.soak.compare import disagreeing_problems
from properties.soak.plan import Plans, Space
from properties.soak.schedule import Pipeline, check_as_written, disagreeing

BENCH_TILE = 8
STAGES = ("draw", "model", "implementation", "compare")


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _batch_stages(plan, index, device, reference, impl, draws):
    """Seconds of each stage of one batch, each alone; the disagreeing problems must be none."""
    seconds, t = {}, time.perf_counter()

    def lap(stage):
        nonlocal t
        _sync(device)
        now = time.perf_counter()
        seconds[stage], t = now - t, now

    batch = draws.batch(plan, index)
    lap("draw")
    want = reference.run(batch)
    lap("model")
    got = impl.enqueue(batch, want)
    lap("implementation")
    bad = disagreeing_problems(got, want)
    lap("compare")
    return seconds, bad


def _retire_counting(pipeline, name):
    """Disagreements of the oldest batch; ModelMismatch where its graphed draw or compiled or graphed model
    differs from the code as written."""
    flight = pipeline.retire()
    check_as_written(flight)
    return len(disagreeing(flight, name))


def bench_one(impl, b, metadata, device, problems, batches, reference, draws, depth=2, seed=0):
    """{"implementation", "b", "metadata", "rows_per_second", "stage_seconds_per_batch", "overlap", ...} of
    ``impl`` against ``reference`` (the soak's Model) on batches from ``draws`` (properties/soak/graphed.py)."""
    space = Space(b=(b,), renormalize=(True,), metadata="on" if metadata else "off", tiles=(BENCH_TILE,),
                  problems=problems, plan_batches=2 * batches + 2)
    plans = Plans(space, seed)
    pipeline = Pipeline(device, reference, [impl], plans, depth, draws=draws)
    pipeline.enqueue(0)  # warm-up: captures the graphs, compiles the model, checks them against the code as written
    disagreements = _retire_counting(pipeline, impl.name)
    _sync(device)
    start = time.perf_counter()
    for index in range(1, batches + 1):
        pipeline.enqueue(index)
        if pipeline.full:
            disagreements += _retire_counting(pipeline, impl.name)
    while pipeline.in_flight:
        disagreements += _retire_counting(pipeline, impl.name)
    _sync(device)
    elapsed = time.perf_counter() - start
    plan = plans.for_batch(0)
    stages = {stage: 0.0 for stage in STAGES}
    for index in range(batches + 1, 2 * batches + 1):
        seconds, bad = _batch_stages(plan, index, device, reference, impl, draws)
        disagreements += len(bad)
        for stage in STAGES:
            stages[stage] += seconds[stage] / batches
    per_batch = elapsed / batches
    return {"implementation": impl.name, "b": b, "metadata": metadata, "tile_n": BENCH_TILE if metadata else None,
            "rows_per_batch": plan.rows, "batches": batches, "rows_per_second": round(plan.rows / per_batch),
            "seconds_per_batch": round(per_batch, 6), "stage_seconds_per_batch": {k: round(v, 6) for k, v in stages.items()},
            "overlap": round(sum(stages.values()) / per_batch, 2), "depth": pipeline.depth,
            "branches": impl.branches, "model": reference.describe(), "draw": draws.describe(),
            "disagreements": disagreements}


def bench(impls, bs, device, problems, batches, reference, depth, draws):
    """bench_one for every implementation, b and metadata choice (an implementation that writes metadata
    only skips the variant without metadata); prints one line each."""
    results = []
    for impl in impls:
        for metadata in (False, True):
            if not metadata and impl.impl.declaration.writes == ("metadata",):
                continue
            for b in bs:
                r = bench_one(impl, b, metadata, device, problems, batches, reference, draws, depth)
                results.append(r)
                stages = " ".join(f"{k} {v * 1e3:.2f} ms" for k, v in r["stage_seconds_per_batch"].items())
                print(f"{impl.name:>12} b={b} {'metadata tile ' + str(BENCH_TILE) if metadata else 'no metadata':>16}: "
                      f"{r['rows_per_second']:>12,} rows/s ({r['rows_per_batch']} rows a batch, "
                      f"{r['seconds_per_batch'] * 1e3:.2f} ms; alone: {stages}; overlap {r['overlap']}x; "
                      f"{r['branches']} branches; model {r['model']}, draw {r['draw']}; {r['disagreements']} disagreements)",
                      flush=True)
    return results
