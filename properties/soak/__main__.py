"""Soak: many rows of drawn edge cases, every implementation against the model on the device, bit for bit.

    python -m properties.soak --rows 1e9 [--seconds S] [--seed N] [--offset N] [--impl cute --impl triton ...]
    python -m properties.soak --impl NAME=MODULE:ATTR --impl NAME=PATH.py:ATTR --rows 1e6  (a verdict each)
    python -m properties.soak --resume S.json --rows 3e8 --seconds 420     (the same command, again, until done)
    python -m properties.soak --fault ties_to_highest_index --rows 1e6     (a planted fault, any machine)
    python -m properties.soak --impl model --rows 1e6                      (the model alone: device vs NumPy)
    python -m properties.soak --bench [--b 1 8]                            (rows/s per variant and b)
    torchrun --standalone --nproc-per-node=gpu -m properties.soak ...      (one rank per GPU)

Every argument is checked before any work (one line naming it, exit 2). A run needs something under test:
on a machine without CUDA that is a planted fault (--fault), a CPU plug-in, or the model alone, asked for by
name (--impl model: the model on the device against the NumPy model's cross-check, so --crosscheck must be
at least 1); without any it is refused. Case files go to reports/soak-failures/ and the summary to
reports/soak.json unless --failures-dir, --out or --resume say otherwise. Each implementation under test
gets a verdict (properties/soak/verdict.py): a table on the terminal and verdict-NAME.json beside the summary.

SIGINT or SIGTERM: no batch is enqueued, the ones in flight are retired, the summary of every batch verified is
written (``interrupted`` names the signal) and one line says so, exit 130 or 143; before the first batch runs,
nothing is written. Every --checkpoint-seconds (default 60) the summary of the batches verified so far is written whole, so
after SIGKILL --resume goes on from it, losing at most that interval; no batch is verified twice.

Exit status, over the whole run (every chunk a --resume added): 0 when everything agreed, 1 when an
implementation disagreed (case files written), a plug-in raised or exited mid-run (its outcome, not the
soak's: the summary of the batches verified before is kept) or the run verified no row, 2 on bad arguments or
an implementation that cannot run ("implementation NAME not run: <reason>"), 3 when the model on the device
differs from the NumPy model (the reference is not trusted). The last line says which: ``soak: PASS``,
``soak: FAIL``, ``soak: NOT RUN``, ``soak: NOTHING VERIFIED``, ``soak: MODEL MISMATCH`` or
``soak: INTERRUPTED``, with what was under test ("model only" for --impl model) and what was compared: rows
against the model on the device, and those also compared with the NumPy model (for the model alone, only
those count). --resume of a finished run compares nothing more: it prints the stored verdict and exits with it. --bench exits 1 when any bit disagreed while timing
(last line ``soak bench: FAIL``) and refuses a run with nothing under test (exit 2).
"""

if __name__ == "__main__":  # Ctrl-C while the imports below load: one line, never a traceback
    from common.interrupts import at_start
    at_start("python -m properties.soak")

import argparse
import json
import re
import signal
import sys
from pathlib import Path

from common.interrupts import Interrupted, Interrupts
from properties.soak import dist
from properties.soak import verdict
from properties.engine import implementations as registry
from properties.engine.compare import REFERENCE
from kernel.layout import MAX_TILE, MAX_TOKENS
from properties.soak.bulk import FAMILIES, TIE_FAMILIES
from properties.soak.loop import Config, implementations, run, under_test
from properties.soak.graphed import Draws
from properties.soak.impls import Model
from properties.soak.plan import METADATA_CHOICES, Space
from properties.soak.summary import SUMMARY_FORMAT, Tally, describe_device, provenance, write_summary
from common import args as types
from common.args import OneLineParser

RENORMALIZE = {"both": (False, True), "true": (True,), "false": (False,)}
DEFAULT_SUMMARY = Path("reports/soak.json")
DEFAULT_FAILURES = Path("reports/soak-failures")
SEED_MAX = 2**63 - 1  # seeds and batch indices are 64-bit words of a numpy SeedSequence
MAX_PROBLEMS = 1 << 20  # problems per batch: b = 8 rows each, 8 KiB of logits a row, on the device
BENCH_PROBLEMS = 1 << 15  # per batch in --bench: enough rows that a batch is not dominated by its launches
MAX_DEPTH = 16


def _device(text):
    if re.fullmatch(r"auto|cpu|cuda(:\d+)?", text) is None:
        raise argparse.ArgumentTypeError(f"must be auto, cpu, cuda or cuda:N, got {text!r}")
    return text


def parser():
    p = OneLineParser(prog="python -m properties.soak", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=types.count(1), help="stop once this many rows (with a resumed run's) are verified")
    p.add_argument("--seconds", type=types.number(minimum=0), help="stop after this many seconds (0: one batch)")
    p.add_argument("--seed", type=types.integer(0, SEED_MAX), default=0)
    p.add_argument("--offset", type=types.integer(0, SEED_MAX), default=0,
                   help="first batch index (resume from a summary's next_offset)")
    p.add_argument("--resume", type=types.output_file, help="continue the run of this summary (its seed, space, "
                   "offset and counts) and update it; where it does not exist yet, start the run and write it there")
    p.add_argument("--impl", action="append", help="an implementation under test, one per --impl (repeat it for "
                   f"more): a built-in name ({', '.join(registry.GPU)}) or a plug-in NAME=MODULE:ATTR / "
                   f"NAME=PATH.py:ATTR (default: those built-ins on a GPU, none on a CPU); {REFERENCE!r} alone: the "
                   "model only")
    p.add_argument("--fault", nargs="*", default=[], choices=sorted(registry.FAULTS), help="planted faults to run as well")
    p.add_argument("--device", type=_device, default="auto",
                   help="auto, cpu or cuda:N (default: the rank's GPU, else the CPU)")
    p.add_argument("--backend", default="auto", choices=dist.BACKENDS)
    p.add_argument("--b", type=types.integer(1, MAX_TOKENS), nargs="+", default=list(range(1, MAX_TOKENS + 1)),
                   help="token counts")
    p.add_argument("--renormalize", choices=sorted(RENORMALIZE), default="both")
    p.add_argument("--metadata", choices=METADATA_CHOICES, default="mixed")
    p.add_argument("--tile", type=types.integer(1, MAX_TILE), nargs="+",
                   help=f"tiles (default: special tiles or any in 1..{MAX_TILE})")
    p.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    p.add_argument("--problems", type=types.integer(1, MAX_PROBLEMS),
                   help=f"problems (calls of b rows) per batch (default {Space.problems}; --bench: {BENCH_PROBLEMS})")
    p.add_argument("--depth", type=types.integer(1, MAX_DEPTH), default=Config.depth,
                   help="batches on the device at once (1: one after another)")
    p.add_argument("--compile-model", action=argparse.BooleanOptionalAction, default=Config.compile_model,
                   help="the model's ids and weights through torch.compile on a GPU, checked against the "
                   "uncompiled model on every plan's first batch (--no-compile-model: as written)")
    p.add_argument("--graph-stages", action=argparse.BooleanOptionalAction, default=Config.graph_stages,
                   help="each plan's draw and model replayed from CUDA graphs on a GPU, checked against the code "
                   "as written on every plan's first batch (--no-graph-stages: issued operation by operation)")
    p.add_argument("--plan-batches", type=types.integer(1, SEED_MAX), default=Space.plan_batches,
                   help="batches per plan (per graph)")
    p.add_argument("--crosscheck", type=types.integer(0, MAX_PROBLEMS), default=Config.crosscheck,
                   help="problems per batch also run by the NumPy model on the CPU (0: none)")
    p.add_argument("--stop-on-failure", action=argparse.BooleanOptionalAction, default=False,
                   help="stop at the first disagreement (--no-stop-on-failure: continue, the default)")
    p.add_argument("--minimise", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--failures-dir", type=types.output_dir, default=str(DEFAULT_FAILURES),
                   help=f"case files of disagreements (default {DEFAULT_FAILURES})")
    p.add_argument("--out", dest="summary", type=types.output_file,
                   help=f"summary JSON (default {DEFAULT_SUMMARY}, or the resumed one)")
    p.add_argument("--checkpoint-seconds", type=types.number(above=0), default=Config.checkpoint_seconds,
                   help="write the summary of the batches verified so far this often (a killed run resumes from it)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--bench", action="store_true", help="print rows/s per implementation, variant and b")
    p.add_argument("--bench-batches", type=types.integer(1, SEED_MAX), default=20)
    return p


def _is_tally(data):
    """Whether ``data`` is a Tally's JSON (only its fields, counts that are integers)."""
    try:
        tally = Tally.from_json(data)
    except (TypeError, ValueError):
        return False
    return all(isinstance(getattr(tally, name), int) for name in ("rows", "problems", "batches", "crosscheck_rows"))


def _previous(path):
    """The soak summary at ``path`` (None where it does not exist yet); ValueError naming --resume when the
    file is not one."""
    if not path.exists():
        return None
    try:
        data = types.read_json_object(path)
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"--resume: {exc}") from None
    if data.get("format") != SUMMARY_FORMAT:
        raise ValueError(f"--resume: {path}: not a soak summary (format {data.get('format')!r})")
    fields = {"seed": int, "next_offset": int, "space": dict, "tally": dict, "implementations": list,
              "model_mismatches": list}
    wrong = [name for name, kind in fields.items() if not isinstance(data.get(name), kind)]
    wrong += [name for name in ("seed", "next_offset") if name not in wrong and not 0 <= data[name] <= SEED_MAX]
    if not wrong and not _is_tally(data["tally"]):
        wrong.append("tally")
    if wrong:
        raise ValueError(f"--resume: {path}: not a soak summary: {', '.join(wrong)} missing or malformed")
    return data


def _under_test(args, ctx):
    """The names under test: built-in names as given, plug-in specs loaded and probed (NotRun when one cannot
    run); ValueError naming the argument when the run would test nothing or asks for what this device cannot run."""
    impls = args.impl if args.impl is not None else (registry.GPU if ctx.device.type == "cuda" else ())
    # the reference alone (--impl model): nothing but the model on the device, against the NumPy cross-check
    chosen = tuple(registry.resolve([spec for spec in impls if spec != REFERENCE], (*registry.GPU, REFERENCE),
                                    ctx.device))
    if not chosen and not args.fault:
        if REFERENCE not in (args.impl or ()):
            raise ValueError(f"--impl: no implementation under test on {ctx.device} (the GPU implementations need "
                             f"CUDA): --impl {REFERENCE} soaks the model alone, --fault NAME adds a planted fault, "
                             "NAME=MODULE:ATTR a plug-in")
        if args.crosscheck < 1:
            raise ValueError(f"--crosscheck 0 with --impl {REFERENCE}: the model alone is checked only by the "
                             "cross-check, so nothing would be compared")
    return chosen


# What each planted fault needs of the space to show, the option that gives it and what to ask: a self-test
# whose fault cannot show would pass without testing anything.
FAULT_NEEDS = {
    "writes_the_guard": ("--metadata", lambda space: space.metadata != "off",
                         "it differs only in the metadata guard: --metadata on or mixed"),
    "ties_to_highest_index": ("--families", lambda space: bool(set(space.families) & set(TIE_FAMILIES)),
                              f"it differs only on ties: --families with one of {', '.join(TIE_FAMILIES)}"),
}


def _check_faults(faults, space, resumed):
    """ValueError naming the option when the space leaves a planted fault of ``faults`` no way to show."""
    for fault in faults:
        option, shows, needs = FAULT_NEEDS[fault]
        if not shows(space):
            value = getattr(space, option.removeprefix("--"))
            given = " ".join(value) if isinstance(value, tuple) else value
            whose = "the resumed run's " if resumed else ""
            raise ValueError(f"--fault {fault} cannot show with {whose}{option} {given}: {needs}")


def _space(args):
    return Space(b=tuple(args.b), renormalize=RENORMALIZE[args.renormalize], metadata=args.metadata,
                 tiles=tuple(args.tile) if args.tile else None, families=tuple(args.families),
                 problems=args.problems or Space.problems, plan_batches=args.plan_batches)


def _config(args, ctx):
    """The Config of ``args``; ValueError naming the argument when they do not make a run."""
    if args.rows is None and args.seconds is None:
        raise ValueError("give --rows, --seconds or both")
    impls = _under_test(args, ctx)
    previous, seed, offset, space = None, args.seed, args.offset, _space(args)
    if args.resume:
        previous = _previous(args.resume)
    if previous:
        seed, offset = previous["seed"], previous["next_offset"]
        try:
            space = Space(**{k: tuple(v) if isinstance(v, list) else v for k, v in previous["space"].items()})
        except (TypeError, ValueError) as exc:
            raise ValueError(f"--resume: {args.resume}: space: {exc}") from None
    _check_faults(args.fault, space, previous is not None)
    checkpoint = args.summary or args.resume or DEFAULT_SUMMARY
    try:
        types.check_output(checkpoint)  # the default's; --out's and --resume's are their types'
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"argument --out: {exc}") from None
    config = Config(seed=seed, offset=offset, rows=args.rows, seconds=args.seconds, space=space,
                    implementations=tuple(impls), faults=tuple(args.fault), stop_on_failure=args.stop_on_failure,
                    minimise=args.minimise, crosscheck=args.crosscheck, failures_dir=args.failures_dir,
                    progress=args.progress, previous=previous, depth=args.depth, compile_model=args.compile_model,
                    graph_stages=args.graph_stages, checkpoint=checkpoint,
                    checkpoint_seconds=args.checkpoint_seconds)
    under_test(config)
    return config


def _verdict(summary, under_test):
    """(exit status, last line) of a run, over the whole run (every resumed chunk's tally): a plug-in that
    stopped it, a model mismatch, no row, disagreements, else PASS."""
    whole = summary["tally"]
    what = ", ".join(under_test) or "model only"
    rows, crosschecked = whole["rows"], whole["crosscheck_rows"]
    for name, reason in summary.get("not_run", {}).items():
        return 1, (f"soak: NOT RUN: implementation {name} not run: {reason}; {rows} rows verified before, summary "
                   "kept (exit 1)")
    if summary["model_mismatches"]:
        return 3, "soak: MODEL MISMATCH: the model on the device differs from the NumPy model (exit 3)"
    if rows == 0:
        return 1, f"soak: NOTHING VERIFIED: 0 rows ({what}) (exit 1)"
    if not under_test and not crosschecked:
        return 1, f"soak: NOTHING VERIFIED: 0 of {rows} rows compared with the NumPy model ({what}) (exit 1)"
    bad = sum(whole["disagreements"].values())
    if bad:
        return 1, f"soak: FAIL: {bad} disagreeing problem(s) in {rows} rows ({what}) (exit 1)"
    if not under_test:
        return 0, (f"soak: PASS: {crosschecked} rows of the model on the device equal to the NumPy model's, of "
                   f"{rows} drawn ({what}) (exit 0)")
    return 0, (f"soak: PASS: {rows} rows agreed with the model on the device, {crosschecked} of them also "
               f"compared with the NumPy model ({what}) (exit 0)")


def main(argv=None):
    """The soak; SIGINT or SIGTERM before its loop runs batches: one line, exit 128 + the signal's number,
    nothing written (common/interrupts.py); once it does, see _interrupted."""
    with Interrupts() as interrupts:
        try:
            return _main(argv, interrupts)
        except Interrupted as exc:
            print(f"soak: INTERRUPTED by {exc.name} before any batch was verified: nothing written "
                  f"(exit {exc.exit_status})")
            return exc.exit_status


def _interrupted(summary, path, interrupts):
    """(exit status, last line) of a run a signal ended: the summary at ``path`` covers every batch retired."""
    this = summary["this_run"]
    bad = sum(this["tally"]["disagreements"].values())
    status = interrupts.exit_status or 128 + signal.SIGINT  # the signal reached another rank only
    return status, (f"soak: INTERRUPTED by {summary['interrupted']}: {this['rows']} rows done, "
                    f"{this['tally']['crosscheck_rows']} of them also compared with the NumPy model, {bad} disagreeing "
                    f"problem(s); summary {path} (--resume {path} goes on from batch {summary['next_offset']}) "
                    f"(exit {status})")


def _main(argv, interrupts):
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
                config = Config(implementations=_under_test(args, ctx), faults=tuple(args.fault))
                if not under_test(config):
                    raise ValueError(f"--bench: nothing to time on {ctx.device}: name an implementation (--impl "
                                     "NAME or NAME=MODULE:ATTR) or a planted fault (--fault NAME)")
            except ValueError as exc:  # NotRun, a malformed --impl, or nothing under test
                p.error(str(exc))
            impls = implementations(config)
            reference = Model.on(ctx.device, args.compile_model, args.graph_stages, reference=impls[0].impl.reference)
            results = bench(impls, args.b, ctx.device, args.problems or BENCH_PROBLEMS,
                            args.bench_batches, reference, args.depth, Draws(ctx.device, args.graph_stages))
            if args.summary:
                write_summary(args.summary, {"bench": results, "provenance": provenance([describe_device(ctx.device)])})
            bad = sum(r["disagreements"] for r in results)
            if bad:
                print(f"soak bench: FAIL: {bad} disagreeing problem(s) while timing (exit 1)")
                return 1
            print(f"soak bench: {len(results)} variant(s) timed, every bit agreed (exit 0)")
            return 0
        try:
            config = _config(args, ctx)
        except (ValueError, OSError, KeyError) as exc:
            p.error(str(exc))
        if config.previous and config.rows is not None and config.previous["tally"]["rows"] >= config.rows:
            status, line = _verdict(config.previous, config.previous["implementations"])
            if ctx.leader:  # a finished run compares nothing more: its stored verdict is the answer
                print(f"{args.resume}: done, {config.previous['tally']['rows']} rows of {config.rows}: its verdict")
                print(line)
            return status
        summary = run(config, ctx, interrupts)
        path = config.checkpoint
        if "interrupted" in summary:
            if ctx.leader:
                write_summary(path, summary)
            status, line = _interrupted(summary, path, interrupts)
            if ctx.leader:
                print(line)
            return status
        if ctx.leader:
            path = write_summary(path, summary)
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
        status, line = _verdict(summary, summary["implementations"])
        if ctx.leader:
            print(line)
        return status
    finally:
        dist.teardown(ctx)


if __name__ == "__main__":
    sys.exit(main())
