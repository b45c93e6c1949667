"""The speed check's measurement on a GPU: the graphed per-launch time of every shape of
properties/bench/speed_record.py, for a kernel module (kernel/routing.py, or a copy with its ``route`` and
``prepare``).

    python -m properties.bench.speed --out FILE [--kernel PATH.py]   # one round's figures (what make bench repeats)

A figure is the fastest of ``repetitions`` timed replays of a CUDA graph of ``iterations`` back-to-back route calls
on the bench inputs (properties/bench/variants.py's ``time_once``: with metadata tile 8, every expert local), the
fastest again over PASSES passes over every shape after one untimed pass (the card's clocks come up in it): time
that other work on the GPU adds cannot make a figure faster than the kernel. Exit 1 when a shape could not be
timed (the file is written either way), 2 on a bad argument or without a GPU.
"""

import json
import sys
from pathlib import Path

import torch

from common import interrupts
from common.args import OneLineParser
from common import args as types
from kernel import routing
from properties.bench import speed_record
from properties.bench.speed_record import SHAPES, VARIANTS
from properties.bench.timing import error_line
from properties.bench.variants import time_once

ITERATIONS, REPETITIONS = 1000, 20
PASSES = 3
MODES = dict(zip(VARIANTS, ("plain", "metadata")))  # time_once's name of each speed_record variant
METHOD = (f"per shape the fastest of {REPETITIONS} timed replays of a CUDA graph of {ITERATIONS} route calls on the "
          f"bench inputs (with metadata tile 8, every expert local), the fastest over {PASSES} passes over every "
          "shape after one untimed pass")


def measure(route, passes=PASSES, iterations=ITERATIONS, repetitions=REPETITIONS):
    """{name: {b: µs}} of ``route`` (prepared) over SHAPES, or {name: {b: {"error": line}}} for a shape that failed."""
    best = {name: {} for name in VARIANTS}
    for timed in (False,) + (True,) * passes:
        for name, b in SHAPES:
            try:
                figure = time_once(route, b, MODES[name], iterations, repetitions)["min_us"]
            except Exception as exc:  # noqa: BLE001 - the shape is reported as not measured; the others still run
                best[name][str(b)] = {"error": error_line(exc)}
                continue
            kept = best[name].get(str(b))
            if timed and not isinstance(kept, dict):
                best[name][str(b)] = figure if kept is None else min(kept, figure)
    return best


def load(path):
    """(route, prepare) of the kernel module at ``path`` (None: kernel/routing.py)."""
    if path is None:
        return routing.route, routing.prepare
    from properties.bench.variants import load as load_variant

    impl = load_variant(Path(path).stem, path)
    return impl.route, impl.declaration.prepare


def gpu_name():
    return torch.cuda.get_device_name(0)


def _round(args):
    if not torch.cuda.is_available():
        print("properties.bench.speed: no CUDA device: the measurement runs on a GPU", file=sys.stderr)
        return 2
    route, prepare = load(args.kernel)
    prepare(True)
    figures = measure(route)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"gpu": gpu_name(), "method": METHOD, "figures_us": figures}, indent=1)
                              + "\n")
    failed = [speed_record.shape_label(n, b) for n, b in SHAPES if isinstance(figures[n].get(str(b)), dict)]
    if failed:
        print(f"properties.bench.speed: not measured: {', '.join(failed)}; figures in {args.out}", file=sys.stderr)
    return 1 if failed else 0


def parse_args(argv):
    parser = OneLineParser(prog="python -m properties.bench.speed", description=__doc__)
    parser.add_argument("--out", required=True, type=types.output_file, help="the round's figures (JSON)")
    parser.add_argument("--kernel", type=types.existing_file, default=None,
                        help="a copy of kernel/routing.py (its route and prepare) instead of the kernel")
    args = parser.parse_args(argv)
    if args.kernel is not None and args.kernel.suffix != ".py":
        parser.error(f"argument --kernel: {args.kernel} is not a .py file")
    return args


def main(argv=None):
    return _round(parse_args(argv))


if __name__ == "__main__":
    sys.exit(interrupts.run("python -m properties.bench.speed", main))
