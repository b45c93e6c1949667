"""Throughput of the soak per implementation, variant and b: verified rows per second end to end (draw,
model, implementation, compare; one plan, so its graph is captured once, outside the timing), then where a
batch's time goes (each stage synchronised)."""

import time

import torch

from properties.soak.compare import disagreeing_problems
from properties.soak.impls import Model
from properties.soak.plan import Space, make_batch, make_plan

BENCH_TILE = 8
STAGES = ("draw", "model", "implementation", "compare")


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _batch_stages(plan, index, device, reference, impl):
    """Seconds of each stage of one batch; the disagreeing problems must be none."""
    seconds, t = {}, time.perf_counter()

    def lap(stage):
        nonlocal t
        _sync(device)
        now = time.perf_counter()
        seconds[stage], t = now - t, now

    batch = make_batch(plan, index, device)
    lap("draw")
    want = reference.run(batch)
    lap("model")
    got = impl.run(batch, want)
    lap("implementation")
    bad = disagreeing_problems(got, want)
    lap("compare")
    return seconds, bad


def bench_one(impl, b, metadata, device, problems, batches, seed=0):
    """{"implementation", "b", "metadata", "rows_per_second", "stage_seconds_per_batch", ...} of ``impl``."""
    space = Space(b=(b,), renormalize=(True,), metadata="on" if metadata else "off", tiles=(BENCH_TILE,),
                  problems=problems, plan_batches=batches + 1)
    plan, reference = make_plan(space, seed, 0), Model()
    _, bad = _batch_stages(plan, 0, device, reference, impl)  # warm-up: compiles, captures the graph
    disagreements = len(bad)
    _sync(device)
    start = time.perf_counter()
    for index in range(1, batches + 1):
        batch = make_batch(plan, index, device)
        want = reference.run(batch)
        disagreements += len(disagreeing_problems(impl.run(batch, want), want))
    _sync(device)
    elapsed = time.perf_counter() - start
    stages = {stage: 0.0 for stage in STAGES}
    for index in range(batches + 1, 2 * batches + 1):
        seconds, bad = _batch_stages(plan, index, device, reference, impl)
        disagreements += len(bad)
        for stage in STAGES:
            stages[stage] += seconds[stage] / batches
    return {"implementation": impl.name, "b": b, "metadata": metadata, "tile_n": BENCH_TILE if metadata else None,
            "rows_per_batch": plan.rows, "batches": batches, "rows_per_second": round(plan.rows * batches / elapsed),
            "stage_seconds_per_batch": {k: round(v, 6) for k, v in stages.items()}, "disagreements": disagreements}


def bench(impls, bs, device, problems, batches):
    """bench_one for every implementation, b and metadata choice (an implementation that makes no ids skips
    the variant without metadata); prints one line each."""
    results = []
    for impl in impls:
        for metadata in (False, True):
            if impl.name == "flashinfer" and not metadata:
                continue
            for b in bs:
                r = bench_one(impl, b, metadata, device, problems, batches)
                results.append(r)
                stages = " ".join(f"{k} {v * 1e3:.2f} ms" for k, v in r["stage_seconds_per_batch"].items())
                print(f"{impl.name:>12} b={b} {'metadata tile ' + str(BENCH_TILE) if metadata else 'no metadata':>16}: "
                      f"{r['rows_per_second']:>12,} rows/s ({r['rows_per_batch']} rows a batch; {stages}; "
                      f"{r['disagreements']} disagreements)", flush=True)
    return results
