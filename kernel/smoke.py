"""First run on a GPU: ``python -m kernel.smoke`` from the repository root. Compiles every variant, routes
the project's adversarial row families (properties/families.py) in batches of every b against the
NumPy model (ids, weights and metadata, bit for bit), replays a CUDA graph and times a launch. Prints the
first mismatching rows in hex; exits 1 on any mismatch."""

import sys
import time

import torch

from kernel import check, routing
from kernel.layout import EXPERTS, MAX_TOKENS

TILES = (1, 3, 8, 64, 256)
SCALE = 2.5


def _adversarial_rows():
    """The project's adversarial row families (properties/families.py)."""
    from properties import families

    return families


def _correctness(rows_module):
    failures, cases = [], 0
    for family in rows_module.families():
        for b in range(1, MAX_TOKENS + 1):
            for i, rows in enumerate(rows_module.batches(family.rows, b)):
                for renormalize in (True, False):
                    for local in (None, check.Local(0, EXPERTS, TILES[(b + i) % len(TILES)])):
                        lines = check.run_case(rows, family.bias, SCALE, renormalize, local)
                        cases += 1
                        if lines:
                            failures.append(check.describe(f"{family.name} b={b} batch {i}", SCALE, renormalize,
                                                           local, lines))
    return cases, failures


def _graph_replay(rows_module, replays=3):
    """Capture one route with metadata, replay it on new logits; returns mismatch reports."""
    local = check.Local(32, 64, 4)
    family = rows_module.families()[1]
    bias = family.bias
    buffers = check.make_buffers(rows_module.pooled_rows([family], MAX_TOKENS, seed=0), bias, local, "cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        check.call_route(buffers, SCALE, True, local)
    failures = []
    for seed in range(1, replays + 1):
        rows = rows_module.pooled_rows(rows_module.families(), MAX_TOKENS, seed=seed)
        buffers.logits.copy_(torch.from_numpy(rows))
        buffers.poison()
        graph.replay()
        torch.cuda.synchronize()
        lines = check.compare(buffers, check.expected(rows, bias, SCALE, True, local), local.tile)
        if lines:
            failures.append(check.describe(f"graph replay, pooled rows seed {seed}", SCALE, True, local, lines))
    return replays, failures


def _time_launch(rows_module, iterations=2000):
    """Mean microseconds per route launch (b = 8, metadata, tile 8), back to back on one stream."""
    local = check.Local(0, EXPERTS, 8)
    family = rows_module.families()[-1]
    buffers = check.make_buffers(family.rows[:MAX_TOKENS], family.bias, local, "cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    check.call_route(buffers, SCALE, True, local)
    start.record()
    for _ in range(iterations):
        check.call_route(buffers, SCALE, True, local)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000 / iterations


def main():
    print(f"device: {torch.cuda.get_device_name()} (capability {torch.cuda.get_device_capability()})")
    began = time.time()
    for renormalize in (True, False):
        routing.prepare(renormalize)
    print(f"compiled and loaded 4 variants in {time.time() - began:.1f} s")
    rows_module = _adversarial_rows()
    cases, failures = _correctness(rows_module)
    replays, graph_failures = _graph_replay(rows_module)
    failures += graph_failures
    for report in failures[:5]:
        print("MISMATCH " + report)
    print(f"{cases} cases + {replays} graph replays: {len(failures)} mismatching")
    print(f"route launch: {_time_launch(rows_module):.2f} us (mean of back-to-back launches, host-bound)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
