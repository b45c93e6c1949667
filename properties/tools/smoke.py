"""First run on a GPU: ``python -m properties.tools.smoke`` from the repository root. Compiles every variant,
routes the adversarial row families (properties/inputs/families.py) in batches of every b through the engine
(properties/engine/device.py: ids, weights and metadata against the NumPy model, bit for bit), replays a
CUDA graph and times a launch. Prints the first mismatches; exits 1 on any mismatch, 2 on any argument (it
takes none) or without a CUDA device."""

if __name__ == "__main__":  # Ctrl-C while the imports below load: one line, never a traceback
    from common.interrupts import at_start
    at_start("python -m properties.tools.smoke")

import sys
import time
from dataclasses import replace

import numpy as np
import torch

from kernel import routing
from kernel.layout import EXPERTS, MAX_TOKENS
from common import interrupts
from common.provenance import cuda_reason
from properties.engine import device
from properties.engine.cases import RoutingCase
from properties.inputs.families import batches, families, pooled_rows
from common.args import OneLineParser

TILES = (1, 3, 8, 64, 256)
SCALE = np.float32(2.5)
GRAPH_REQUEST = (4, 32, 64)  # tile_n, local_expert_offset, num_local_experts
TIMED_TILE = 8
TIMED_LAUNCHES = 2000
REPORTED = 5


def _correctness(all_families):
    """(cases routed, failure reports): every family batch of every b, both renormalize settings, without and
    with the metadata of all experts."""
    failures, count = [], 0
    for family in all_families:
        for b in range(1, MAX_TOKENS + 1):
            for i, rows in enumerate(batches(family.rows, b)):
                for renormalize in (True, False):
                    plain = RoutingCase(np.ascontiguousarray(rows), family.bias, SCALE, renormalize, None, 0, 0,
                                        f"{family.name} b={b} batch {i}")
                    for case in (plain, replace(plain, tile_n=TILES[(b + i) % len(TILES)], num_local_experts=EXPERTS)):
                        lines = device.route(case).mismatches()
                        count += 1
                        if lines:
                            failures.append(device.report(case, lines))
    return count, failures


def _graph_replay(all_families, replays=3):
    """Capture one route with metadata, replay it on new logits; returns mismatch reports."""
    family = all_families[1]
    case = RoutingCase(pooled_rows([family], MAX_TOKENS, seed=0), family.bias, SCALE, True, *GRAPH_REQUEST,
                       "graph capture")
    buffers = device.buffers(case)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        device.launch(buffers)
    failures = []
    for seed in range(1, replays + 1):
        buffers.load(replace(case, logits=pooled_rows(all_families, MAX_TOKENS, seed=seed),
                             generator=f"graph replay, pooled rows seed {seed}"))
        graph.replay()
        device.synchronize()
        lines = buffers.mismatches()
        if lines:
            failures.append(device.report(buffers.case, lines))
    return replays, failures


def _time_launch(all_families):
    """Mean microseconds per route launch (b = 8, metadata, tile 8), back to back on one stream."""
    family = all_families[-1]
    case = RoutingCase(np.ascontiguousarray(family.rows[:MAX_TOKENS]), family.bias, SCALE, True, TIMED_TILE, 0,
                       EXPERTS, "timed launch")
    buffers = device.buffers(case)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    device.launch(buffers)
    start.record()
    for _ in range(TIMED_LAUNCHES):
        device.launch(buffers)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000 / TIMED_LAUNCHES


def main(argv=None):
    OneLineParser(prog="python -m properties.tools.smoke", description=__doc__).parse_args(argv)
    reason = cuda_reason()
    if reason is not None:
        print(f"smoke: {reason}: the smoke run needs a CUDA device", file=sys.stderr)
        return 2
    print(f"device: {torch.cuda.get_device_name()} (capability {torch.cuda.get_device_capability()})")
    began = time.time()
    for renormalize in (True, False):
        routing.prepare(renormalize)
    print(f"compiled and loaded 4 variants in {time.time() - began:.1f} s")
    all_families = families()
    count, failures = _correctness(all_families)
    replays, graph_failures = _graph_replay(all_families)
    failures += graph_failures
    for report in failures[:REPORTED]:
        print("MISMATCH " + report)
    print(f"{count} cases + {replays} graph replays: {len(failures)} mismatching")
    print(f"route launch: {_time_launch(all_families):.2f} us (mean of back-to-back launches, host-bound)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(interrupts.run("python -m properties.tools.smoke", main))
