"""Throughput of the NumPy model on one CPU core: route rows/s, sigmoid_f32 elements/s and, with --approx, every
modelled approximate op of oracles.numpy_model.approx in M values/s (issue 30's target: 50 each).

    python -m oracles.numpy_model.bench [--rows N] [--elements N] [--repeats N] [--approx]

Prints the best of ``repeats`` timings, each in CPU seconds of this process pinned to one core (so other
processes sharing the machine do not count); the coefficients are loaded before timing starts.
"""

import argparse
import os
import platform
import time

import numpy as np

from common.args import OneLineParser, count
from oracles.numpy_model import route, sigmoid_f32


def _best_seconds(fn, repeats):
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def main(argv=None):
    parser = OneLineParser(prog="python -m oracles.numpy_model.bench", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=count(1, 1 << 20), default=8192)
    parser.add_argument("--elements", type=count(16, 1 << 28), default=1 << 24)
    parser.add_argument("--repeats", type=count(1, 100), default=5)
    parser.add_argument("--approx", action="store_true", help="also time every op of oracles.numpy_model.approx")
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
    if args.approx:
        _approx(np.abs(x), rng.integers(0, 1 << 16, args.elements, dtype=np.uint16), args.repeats)


def _approx(x, h, repeats):
    """M values/s of every modelled approximate op: float32 ones on |N(0, 10)|, 16-bit ones on random patterns."""
    from oracles.mufu.proof import APPROX_16, APPROX_F32
    from oracles.numpy_model import approx

    for names, values, what in ((APPROX_F32, x, "|N(0, 10)| float32"), (APPROX_16, h, "random 16-bit patterns")):
        for name in names:
            op = getattr(approx, name)
            op(values[:16])  # builds what the op computes once (coefficients, its 16-bit outputs)
            seconds = _best_seconds(lambda: op(values), repeats)
            print(f"{name + ':':22} {values.size / seconds / 1e6:,.1f} M values/s ({values.size} {what})")


if __name__ == "__main__":
    main()
