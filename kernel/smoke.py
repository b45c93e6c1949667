"""First run on a GPU: ``python -m kernel.smoke``. Compiles every variant, routes a few hundred adversarial
cases against the NumPy model (ids, weights and metadata, bit for bit), replays a CUDA graph and times a
launch. Prints the first mismatching rows in hex; exits 1 on any mismatch."""

import sys
import time

import torch

from kernel import check, routing
from kernel.layout import EXPERTS, MAX_TOKENS

SEEDS = (0, 1)
TILES = (1, 3, 8, 64, 256)
SCALE = 2.5


def _correctness():
    failures, cases = [], 0
    for kind in check.KINDS:
        for seed in SEEDS:
            for b in range(1, MAX_TOKENS + 1):
                logits, bias = check.make_inputs(kind, b, seed * 100 + b)
                for renormalize in (True, False):
                    tile = TILES[(seed + b) % len(TILES)]
                    for local in (None, check.Local(0, EXPERTS, tile)):
                        lines = check.run_case(logits, bias, SCALE, renormalize, local)
                        cases += 1
                        if lines:
                            failures.append(check.describe(kind, seed, b, SCALE, renormalize, local, lines))
    return cases, failures


def _graph_replay():
    """Capture one route with metadata, replay it on new logits; returns mismatch reports."""
    local = check.Local(32, 64, 4)
    logits, bias = check.make_inputs("normal", MAX_TOKENS, 7)
    buffers = check.make_buffers(logits, bias, local, "cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        check.call_route(buffers, SCALE, True, local)
    failures = []
    for seed in range(3):
        logits, _ = check.make_inputs("ties", MAX_TOKENS, 50 + seed)
        buffers.logits.copy_(torch.from_numpy(logits))
        buffers.poison()
        graph.replay()
        torch.cuda.synchronize()
        lines = check.compare(buffers, check.expected(logits, bias, SCALE, True, local), local.tile)
        if lines:
            failures.append(check.describe("ties(graph)", 50 + seed, MAX_TOKENS, SCALE, True, local, lines))
    return failures


def _time_launch(iterations=2000):
    """Mean microseconds per route launch (b = 8, metadata, tile 8), back to back on one stream."""
    local = check.Local(0, EXPERTS, 8)
    logits, bias = check.make_inputs("normal", MAX_TOKENS, 3)
    buffers = check.make_buffers(logits, bias, local, "cuda")
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
    cases, failures = _correctness()
    failures += _graph_replay()
    for report in failures[:5]:
        print("MISMATCH " + report)
    print(f"{cases} cases + 3 graph replays: {len(failures)} mismatching")
    print(f"route launch: {_time_launch():.2f} us (mean of back-to-back launches)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
