"""Soak: many rows of drawn edge cases, every implementation against the model on the device, bit for bit.

    python -m properties.soak --rows 1e9 [--seconds S] [--seed N] [--offset N] [--impl cute triton ...]
    python -m properties.soak --impl NAME=MODULE:ATTR NAME=PATH.py:ATTR --rows 1e6   (plug-ins; a verdict each)
    python -m properties.soak --resume S.json --rows 3e8 --seconds 420     (the same command, again, until done)
    python -m properties.soak --fault ties_to_highest_index --rows 1e6     (a planted fault, any machine)
    python -m properties.soak --bench [--b 1 8]                            (rows/s per variant and b)
    torchrun --standalone --nproc-per-node=gpu -m properties.soak ...      (one rank per GPU)

Each implementation under test gets a verdict (properties/soak/verdict.py): a table on the terminal and
verdict-NAME.json beside the summary. Exit status: 0 when everything agreed, 1 when an implementation
disagreed (case files written), 2 on bad arguments or an implementation that cannot run ("implementation NAME
not run: <reason>"), 3 when the model on the device differs from the NumPy model (the reference is not trusted).
"""

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from properties.soak import dist
from properties.soak import verdict
from properties.soak.adapter import FAULTS, MAX_TOKENS, add_plugins
from properties.soak.bulk import FAMILIES
from properties.soak.engine import Config, implementations, run, under_test
from properties.soak.plan import METADATA_CHOICES, Space
from properties.soak.report import describe_device, provenance, read_summary, write_summary

GPU_NAMES = ("cute", "triton", "flashinfer")
RENORMALIZE = {"both": (False, True), "true": (True,), "false": (False,)}
DEFAULT_SUMMARY = Path("reports/soak.json")


def _count(text):
    """A row count such as 300000000 or 3e8."""
    value = float(text)
    if value < 0 or value != int(value):
        raise argparse.ArgumentTypeError(f"expected a whole non-negative number, got {text!r}")
    return int(value)


def parser():
    p = argparse.ArgumentParser(prog="python -m properties.soak", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=_count, help="stop once this many rows (with a resumed run's) are verified")
    p.add_argument("--seconds", type=float, help="stop after this many seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--offset", type=int, default=0, help="first batch index (resume from a summary's next_offset)")
    p.add_argument("--resume", type=Path, help="continue the run of this summary (its seed, space, offset and "
                   "counts) and update it; where it does not exist yet, start the run and write it there")
    p.add_argument("--impl", nargs="*", help="implementations under test: built-in names (cute, triton, "
                   "flashinfer) or plug-ins NAME=MODULE:ATTR / NAME=PATH.py:ATTR (default: the three built-ins on a "
                   "GPU, none on a CPU)")
    p.add_argument("--fault", nargs="*", default=[], choices=sorted(FAULTS), help="planted faults to run as well")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda:N (default: the rank's GPU, else the CPU)")
    p.add_argument("--backend", default="auto", choices=dist.BACKENDS)
    p.add_argument("--b", type=int, nargs="+", default=list(range(1, MAX_TOKENS + 1)), help="token counts")
    p.add_argument("--renormalize", choices=sorted(RENORMALIZE), default="both")
    p.add_argument("--metadata", choices=METADATA_CHOICES, default="mixed")
    p.add_argument("--tile", type=int, nargs="+", help="tiles (default: special tiles or any in 1..256)")
    p.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    p.add_argument("--problems", type=int, default=Space.problems, help="problems (calls of b rows) per batch")
    p.add_argument("--plan-batches", type=int, default=Space.plan_batches, help="batches per plan (per graph)")
    p.add_argument("--crosscheck", type=int, default=Config.crosscheck,
                   help="problems per batch also run by the NumPy model on the CPU")
    p.add_argument("--stop-on-failure", action=argparse.BooleanOptionalAction, default=False,
                   help="stop at the first disagreement (--no-stop-on-failure: continue, the default)")
    p.add_argument("--minimise", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--failures-dir", type=Path, default=Config.failures_dir)
    p.add_argument("--summary", type=Path, help=f"summary JSON (default {DEFAULT_SUMMARY}, or the resumed one)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--bench", action="store_true", help="print rows/s per implementation, variant and b")
    p.add_argument("--bench-batches", type=int, default=20)
    return p


def _space(args):
    return Space(b=tuple(args.b), renormalize=RENORMALIZE[args.renormalize], metadata=args.metadata,
                 tiles=tuple(args.tile) if args.tile else None, families=tuple(args.families),
                 problems=args.problems, plan_batches=args.plan_batches)


def _implementations(args, ctx):
    """The names under test: built-in names as given, plug-in specs loaded and probed (NotRun when one cannot
    run, ValueError when a spec is malformed)."""
    impls = args.impl if args.impl is not None else (GPU_NAMES if ctx.device.type == "cuda" else ())
    plugins = iter(add_plugins([spec for spec in impls if "=" in spec]))
    return tuple(next(plugins) if "=" in spec else spec for spec in impls)


def _config(args, ctx):
    """The Config of ``args``; ValueError naming the argument when they do not make a run."""
    impls = _implementations(args, ctx)
    previous, seed, offset, space = None, args.seed, args.offset, _space(args)
    if args.resume and args.resume.exists():
        previous = read_summary(args.resume)
        seed, offset = previous["seed"], previous["next_offset"]
        space = Space(**{k: tuple(v) if isinstance(v, list) else v for k, v in previous["space"].items()})
    if args.rows is None and args.seconds is None:
        raise ValueError("give --rows, --seconds or both")
    config = Config(seed=seed, offset=offset, rows=args.rows, seconds=args.seconds, space=space,
                    implementations=tuple(impls), faults=tuple(args.fault), stop_on_failure=args.stop_on_failure,
                    minimise=args.minimise, crosscheck=args.crosscheck, failures_dir=args.failures_dir,
                    progress=args.progress, previous=previous)
    under_test(config)
    return config


def main(argv=None):
    p = parser()
    args = p.parse_args(argv)
    try:
        ctx = dist.setup(args.device, args.backend)
    except ValueError as exc:
        p.error(str(exc))
    try:
        if args.bench:
            from properties.soak.bench import bench

            try:
                config = Config(implementations=_implementations(args, ctx), faults=tuple(args.fault))
                under_test(config)
            except ValueError as exc:  # NotRun or a malformed --impl
                p.error(str(exc))
            results = bench(implementations(config), args.b, ctx.device, args.problems,
                            args.bench_batches)
            if args.summary:
                write_summary(args.summary, {"bench": results, "provenance": provenance([describe_device(ctx.device)])})
            return 0
        try:
            config = _config(args, ctx)
        except (ValueError, OSError, KeyError) as exc:
            p.error(str(exc))
        if config.previous and config.rows is not None and config.previous["tally"]["rows"] >= config.rows:
            if ctx.leader:
                print(f"{args.resume}: done, {config.previous['tally']['rows']} rows of {config.rows}")
            return 0
        summary = run(config, ctx)
        if ctx.leader:
            path = write_summary(args.summary or args.resume or DEFAULT_SUMMARY, summary)
            this = summary["this_run"]
            print(json.dumps({"summary": str(path), "rows": this["rows"], "rows_per_second": this["rows_per_second"],
                              "disagreements": this["tally"]["disagreements"], "case_files": len(summary["case_files"]),
                              "next_offset": summary["next_offset"], "done": summary["done"]}))
            for name in summary["implementations"]:
                one = verdict.of_summary(summary, name)
                print(verdict.table(one))
                print(f"verdict: {verdict.write(path.parent, one)}")
            for message in summary["model_mismatches"]:
                print(f"MODEL MISMATCH: {message}", file=sys.stderr)
        if summary["model_mismatches"]:
            return 3
        return 1 if sum(summary["this_run"]["tally"]["disagreements"].values()) else 0
    finally:
        dist.teardown(ctx)


if __name__ == "__main__":
    sys.exit(main())
