"""Kernel variants beside the committed kernel: each a copy of kernel/routing.py with a change, checked bit for bit
against the model, then timed with the committed kernel in one process, as the benchmark times it.

    python -m properties.bench.variants --variant NAME=PATH.py [...] --out FILE [--b 1 8 ...] [--rounds N]
    python -m properties.bench.variants --table FILE                  # a record's table (no GPU)

A variant module defines ``route`` and ``prepare`` as kernel/routing.py does. The check runs every case of
corpora/regression and the bench inputs of each b of CHECK_BS under every request of CHECK_REQUESTS through
the engine's poisoned buffers, the committed kernel ("committed") included, each against the model. The timing
captures a CUDA graph of back-to-back launches per implementation, b and mode (with metadata: tile 8, every
expert local; without), the median of its replays, in ``--rounds`` rounds interleaved across implementations,
so a variant and the kernel meet the same clocks. The record keeps each variant's file and sha256. Exit
status 1 when an implementation differs from the model or compared nothing, or a measurement failed (the record
is written either way), 2 on a bad argument or without a GPU.
"""

if __name__ == "__main__":  # Ctrl-C while the imports below load: one line, never a traceback
    from common.interrupts import at_start
    at_start("python -m properties.bench.variants")

import argparse
import hashlib
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from kernel import routing
from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS, TOP_K, metadata_size
from common import interrupts
from common.provenance import REPO_ROOT
from properties.bench import record_cli
from properties.bench.cli import provenance
from properties.bench.problem import SCALE, inputs
from properties.bench.results_file import summarize
from properties.bench.timing import capture, error_line, time_graph
from properties.engine import casefile, plugins
from properties.engine.cases import RoutingCase
from properties.engine.compare import REFERENCE, describe, disagreements
from properties.engine.implementations import REGISTRY
from properties.engine.interface import Implementation
from common import args as types

SCHEMA = "kernel.variants/1"
SCHEMA_FILE = Path(__file__).with_name("variants.schema.json")  # what --table reads of a record
COMMITTED = "committed"
MODES = ("metadata", "plain")
TILE_N = 8  # the timed metadata request: tile 8, every expert local (the benchmark's)
CHECK_BS = (1, 2, 5, MAX_TOKENS)
# (tile_n, local_expert_offset, num_local_experts) of the checked calls with metadata: tiles below, at and past
# TOP_K, the largest, and local ranges from none to all, at either end and inside.
CHECK_REQUESTS = tuple((tile, offset, count) for tile in (3, TOP_K, 9, 16, 37, 128, MAX_TILE)
                       for offset, count in ((0, EXPERTS), (0, 0), (0, 32), (64, 64), (7, 13), (200, 56)))
CHECK_CORPUS = REPO_ROOT / "corpora" / "regression"
MAX_LISTED = 5


def load(name, path):
    """The Implementation of variant module ``path`` (the committed kernel's declaration, its own route and
    prepare); plugins.NotRun, one line, when it cannot be imported or lacks either."""
    module = plugins.import_target(name, str(path))
    for attr in ("route", "prepare"):
        if not callable(getattr(module, attr, None)):
            raise plugins.NotRun(name, f"{path} defines no callable {attr} (a variant is a copy of kernel/routing.py)")
    declaration = replace(REGISTRY["cute"].declaration, prepare=module.prepare)
    return Implementation(name, module.route, declaration, str(path))


def check_cases(corpus=CHECK_CORPUS):
    """The checked cases: every case file under ``corpus``, then the bench inputs of each b of CHECK_BS without
    metadata and under every CHECK_REQUESTS request, renormalized and scaled."""
    cases = [casefile.read(path).case for path in casefile.case_files([corpus])]
    for b in CHECK_BS:
        logits, bias = inputs(b)
        for renormalize in (True, False):
            plain = RoutingCase(logits, bias, np.float32(SCALE), renormalize, None, 0, 0, f"bench inputs b={b}")
            cases.append(plain)
            cases.extend(replace(plain, tile_n=tile, local_expert_offset=offset, num_local_experts=count)
                         for tile, offset, count in CHECK_REQUESTS)
    return cases


def check(impls, cases, model=REGISTRY[REFERENCE]):
    """{name: {"calls", "differ", "first"}}: each implementation's outputs on every case against the model's,
    bit for bit (an exception counts as a differing call, with its line)."""
    found = {impl.name: {"calls": 0, "differ": 0, "first": []} for impl in impls}
    for case in cases:
        want = model.run(case)
        for impl in impls:
            entry = found[impl.name]
            entry["calls"] += 1
            try:
                got = impl.run(case)
                lines = [describe(d, case.tile_n) for d in
                         disagreements({model.name: want, impl.name: got}, tile_n=case.tile_n)]
            except Exception as exc:  # noqa: BLE001 - a variant that raises differs; the others still run
                lines = [error_line(exc)]
            if lines:
                entry["differ"] += 1
                if len(entry["first"]) < MAX_LISTED:
                    entry["first"].append(f"{case.describe()}: {lines[0]}")
    return found


def _launch(route, b):
    """{mode: () -> one call of ``route`` on b rows of the bench inputs}, the buffers shared by both modes."""
    logits, bias = (torch.from_numpy(a).cuda() for a in inputs(b))
    ids = torch.empty((b, TOP_K), dtype=torch.int32, device="cuda")
    weights = torch.empty((b, TOP_K), dtype=torch.float32, device="cuda")
    metadata = torch.empty(metadata_size(TILE_N), dtype=torch.int32, device="cuda")
    plain = (logits, bias, ids, weights, routing.scale_f32(SCALE), True)
    return {"metadata": lambda: route(*plain, metadata, 0, EXPERTS, TILE_N), "plain": lambda: route(*plain)}


def time_once(route, b, mode, iterations, repetitions):
    """The summary of ``repetitions`` replays of a graph of ``iterations`` calls of ``route`` in ``mode``."""
    graph = capture(_launch(route, b)[mode], iterations)
    try:
        return summarize(time_graph(graph, iterations, repetitions))
    finally:
        graph.reset()


def _file(path):
    data = Path(path).read_bytes()
    return {"path": str(path), "sha256": hashlib.sha256(data).hexdigest()}


def run(args):
    if not torch.cuda.is_available():
        print("properties.bench.variants: no CUDA device (--table needs none)", file=sys.stderr)
        return 2
    impls = [replace(REGISTRY["cute"], name=COMMITTED), *args.impls]
    for impl in impls:
        impl.declaration.prepare(True)
    record = {"schema": SCHEMA, "provenance": provenance(),
              "config": {"bs": list(args.bs), "rounds": args.rounds, "iterations": args.iterations,
                         "repetitions": args.repetitions, "tile_n": TILE_N, "local_expert_offset": 0,
                         "num_local_experts": EXPERTS, "check_bs": list(CHECK_BS),
                         "check_requests": [list(r) for r in CHECK_REQUESTS],
                         "check_corpus": str(CHECK_CORPUS.relative_to(REPO_ROOT))},
              "implementations": {COMMITTED: _file(routing.__file__),
                                  **{name: _file(path) for name, path in args.variant}}}
    record["check"] = check(impls, check_cases())
    for name, entry in record["check"].items():
        print(f"  check {name}: {entry['differ']} of {entry['calls']} calls differ from the model", flush=True)
    errors = 0
    timed = {impl.name: {mode: {str(b): [] for b in args.bs} for mode in MODES} for impl in impls}
    for _ in range(args.rounds):
        for b in args.bs:
            for mode in MODES:
                for impl in impls:
                    try:
                        median = time_once(impl.route, b, mode, args.iterations, args.repetitions)["median_us"]
                    except Exception as exc:  # noqa: BLE001 - recorded; the others still run
                        errors += 1
                        median = {"error": error_line(exc)}
                    timed[impl.name][mode][str(b)].append(median)
    record["graph"] = timed
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(table(record), end="")
    differ = [name for name, entry in record["check"].items() if entry["differ"]]
    unchecked = [name for name, entry in record["check"].items() if not entry["calls"]]
    if differ or unchecked or errors:
        print(f"properties.bench.variants: {', '.join(differ) or 'none'} differ from the model, "
              f"{', '.join(unchecked) or 'none'} compared nothing; {errors} measurement(s) failed; record in "
              f"{args.out}", file=sys.stderr)
        return 1
    return 0


def _median(samples):
    times = [s for s in samples if isinstance(s, (int, float))]
    return statistics.median(times) if len(times) == len(samples) and times else None


def table(record):
    """The README table of a variants record: per mode, implementation and b the median over rounds of the
    graph medians (in parentheses: minus the committed kernel's), and the check's differing calls."""
    bs = record["config"]["bs"]
    prov = record["provenance"]
    lines = [f"Measured on {prov['gpu']}, driver {prov['driver']}, commit {prov['commit']}, {prov['date']}; µs per "
             f"launch, the median over {record['config']['rounds']} rounds of the median of "
             f"{record['config']['repetitions']} replays of a CUDA graph of {record['config']['iterations']} "
             f"launches (in parentheses: minus {COMMITTED}'s); metadata tile {record['config']['tile_n']}, every "
             f"expert local.", "",
             "| implementation | mode | differing calls | " + " | ".join(f"b={b}" for b in bs) + " |",
             "| --- | --- | --- |" + " --- |" * len(bs)]
    for mode in MODES:
        for name, modes in record["graph"].items():
            check = record["check"][name]
            cells = []
            for b in bs:
                here = _median(modes[mode][str(b)])
                base = _median(record["graph"][COMMITTED][mode][str(b)])
                cells.append("error" if here is None else f"{here:.3f}" + (
                    f" ({here - base:+.3f})" if name != COMMITTED and base is not None else ""))
            lines.append(f"| {name} | {mode} | {check['differ']} of {check['calls']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _variant(text):
    """NAME=PATH.py: a variant's name (not COMMITTED) and its existing .py file."""
    name, sep, path = text.partition("=")
    if not sep or not plugins.NAME.match(name) or name == COMMITTED:
        raise argparse.ArgumentTypeError(f"expected NAME=PATH.py, NAME a letter then letters, digits, '_', "
                                               f"'.' or '-' and not {COMMITTED!r}, got {text!r}")
    if not path.endswith(".py"):
        raise argparse.ArgumentTypeError(f"{path}: not a .py file (a copy of kernel/routing.py)")
    return name, types.existing_file(path)


def parse_args(argv):
    made = record_cli.parser("python -m properties.bench.variants", __doc__)
    made.add_argument("--variant", type=_variant, action="append", default=[], metavar="NAME=PATH.py",
                      help="a copy of kernel/routing.py with a change (repeatable)")
    made.add_argument("--rounds", type=types.integer(1, 100), default=2, help="interleaved timing rounds")
    args = made.parse_args(argv)
    names = [name for name, _ in args.variant]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        made.error(f"argument --variant: {', '.join(repeated)} named twice")
    if args.out and not args.variant:
        made.error("argument --variant: at least one variant to time beside the committed kernel")
    try:
        args.impls = [load(name, path) for name, path in args.variant]
    except plugins.NotRun as refusal:
        made.error(f"argument --variant: {refusal}")
    return record_cli.read_record(made, args, SCHEMA_FILE)


def main(argv=None):
    return record_cli.main(parse_args(argv), table, run)


if __name__ == "__main__":
    sys.exit(interrupts.run("python -m properties.bench.variants", main))
