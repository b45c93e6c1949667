"""Throughput of the NumPy model on one CPU core: route rows/s and sigmoid_f32 elements/s.

    python -m oracles.numpy_model.bench [--rows N] [--elements N] [--repeats N]

Prints the best of ``repeats`` timings, each in CPU seconds of this process pinned to one core (so other
processes sharing the machine do not count); the coefficients are loaded before timing starts.
"""

import argparse
import os
import platform
import time

import numpy as np

from oracles.numpy_model import route, sigmoid_f32


def _best_seconds(fn, repeats):
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--elements", type=int, default=1 << 24)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, (args.rows, 256)).astype(np.float32)
    bias = rng.normal(0, 0.1, 256).astype(np.float32)
    x = rng.normal(0, 10, args.elements).astype(np.float32)
    route(logits[:1], bias, 1.0)  # loads the coefficients
    t_route = _best_seconds(lambda: route(logits, bias, 2.5), args.repeats)
    t_sigmoid = _best_seconds(lambda: sigmoid_f32(x), args.repeats)
    print(f"cpu: {platform.processor() or platform.machine()}, one core, CPU time, numpy {np.__version__}")
    print(f"route:       {args.rows / t_route:,.0f} rows/s ({args.rows} rows of 256 experts, renormalize)")
    print(f"sigmoid_f32: {args.elements / t_sigmoid / 1e6:,.1f} M elements/s ({args.elements} elements)")


if __name__ == "__main__":
    main()
