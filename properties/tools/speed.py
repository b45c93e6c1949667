"""The speed check (`make verify-deep` runs it after the deep tests, on an idle card): the graphed per-launch time of
every shape (b = 1..8, with and without metadata) measured now against the committed bench record of this GPU
model, slower by more than the margin fails (properties/bench/speed_record.py): max(2 x the widest spread of the
record's rounds, the floor: 2 x the widest process-to-process spread of the committed spread record of this GPU
model, or of any card's where none names it), stated in the first line with where each part came from.

    python -m properties.tools.speed [--kernel PATH.py] [--record FILE ...] [--floor FILE ...] [--json FILE]
    python -m properties.tools.speed --mutants [NAME ...] [--record FILE ...] [--floor FILE ...] [--json FILE]
    python -m properties.tools.speed --spread LOG ... --record BENCH.json [--planted LOG] --out FILE

``--kernel``: a copy of kernel/routing.py (its ``route`` and ``prepare``) instead of the kernel, such as the planted
slower kernel properties/bench/planted.py. ``--mutants``: the generated mutants counted equivalent because they
change only the time (TIME_ONLY: properties/mutants/equivalents.py's reasons), or those named, each measured and
checked against the record, beside the kernel measured in the same run; prints how many the check catches.
``--record``: the bench records to choose from (default: every properties/results/bench*.json; the newest with a
speed section naming this GPU counts). ``--floor``: the spread records the floor comes from (default: every
properties/results/speed-spread-*.json). ``--json``: the outcome as JSON. Exit 0: every shape within the margin
(--mutants: every mutant measured); 1: a shape slower (or not measured), or a record malformed; 3: no record
names this GPU (not checked, said so); 2: a bad argument or no GPU, before anything runs.

``--spread`` (no GPU): writes the spread record ``--out`` (properties/results/speed-spread-<card>-<commit>.json)
from the bench record ``--record`` (made with --speed-rounds: its rounds are processes too) and the printed output
of speed checks of the unchanged kernel against it (``LOG``: each a process of its own, on the same idle card);
``--planted``: a speed check's output on the planted slower kernel, kept beside them. Exit 0 written, 2 (one line
naming --record, --spread or --planted) when the record has no rounds or a log is not a whole speed check of the
kernel on the record's card against its reference.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

from common import args as types
from common import interrupts
from common.args import OneLineParser
from common.provenance import REPO_ROOT, cuda_reason, shown
from properties.bench import speed_record
from properties.bench.speed_record import FAIL, NOT_CHECKED, PASS, SHAPES, read_records

RECORDS_DIR = REPO_ROOT / "properties" / "results"
RECORDS_GLOB = "bench*.json"
NOT_CHECKED_EXIT = 3
EXITS = {PASS: 0, FAIL: 1, NOT_CHECKED: NOT_CHECKED_EXIT}
KERNEL_DIR = REPO_ROOT / "kernel"
ROUTING_FILE = "routing.py"


def time_only():
    """The reasons of properties/mutants/equivalents.py that say a mutant changes only the time: every warp sent to
    the exact rounds, another unroll factor, a barrier or wait moved or doubled, the general metadata path taken."""
    from properties.mutants import equivalents as eq

    return (eq.EXACT_ALWAYS, eq.SPURIOUS_TIES, eq.UNROLL, eq.WARP_BARRIER_KEPT, eq.PICKS_BARRIER_KEPT,
            eq.ZEROING_BARRIER_KEPT, eq.WAIT_KEPT, eq.BARRIER_SIDE, eq.BARRIER_TWICE, eq.GENERAL_PATH)


def time_only_mutants(names=()):
    """[(mutant, reason)] of the generated mutants listed equivalent for a TIME_ONLY reason (those of ``names``
    alone when given; ValueError naming one that is not such a mutant)."""
    from properties.mutants import equivalents, generate

    reasons = time_only()
    chosen = [(m, equivalents.LISTED[m.name]) for m in generate.generate(KERNEL_DIR)
              if equivalents.LISTED.get(m.name) in reasons]
    unknown = sorted(set(names) - {m.name for m, _ in chosen})
    if unknown:
        raise ValueError(f"--mutants: {', '.join(unknown)} is no generated mutant counted equivalent for its time "
                         "alone")
    elsewhere = [m.name for m, _ in chosen if m.target != ROUTING_FILE]
    if elsewhere:
        raise ValueError(f"--mutants: {', '.join(elsewhere)} edits a file other than kernel/{ROUTING_FILE}, and the "
                         f"speed check loads copies of {ROUTING_FILE} alone")
    return [(m, why) for m, why in chosen if not names or m.name in names]


def _worst(figures, reference):
    """(relative change, shape label) of the shape slowed most in ``figures`` against ``reference`` (None: none
    measured)."""
    changes = [(figures[n][str(b)] / reference[n, b] - 1, speed_record.shape_label(n, b)) for n, b in SHAPES
               if not isinstance(figures[n].get(str(b)), dict)]
    return max(changes) if changes else None


def _change(worst):
    return "n/a" if worst is None else f"{worst[1]} {worst[0]:+.1%}"


def check(args, gpu):
    """The speed check of args.kernel (None: the kernel) on this GPU: (exit status, the JSON outcome)."""
    from properties.bench import speed

    def measure():
        route, prepare = speed.load(args.kernel)
        prepare(True)
        return speed.measure(route)

    outcome = speed_record.decide(read_records(args.record), gpu, measure, read_records(args.floor))
    for line in outcome.lines:
        print(f"  {line}")
    print(f"speed check: {outcome.status.upper()} ({gpu}, {shown(args.kernel) if args.kernel else 'kernel'})")
    return EXITS[outcome.status], {"gpu": gpu, "kernel": shown(args.kernel) if args.kernel else "kernel",
                                   "status": outcome.status, "record": outcome.record,
                                   "margin": outcome.margin.as_json() if outcome.margin else None,
                                   "lines": list(outcome.lines)}


def mutants(args, gpu):
    """The speed check on each selected time-only mutant, against the record and beside the kernel measured now."""
    from kernel import routing
    from properties.bench import speed

    try:
        found = speed_record.pick(read_records(args.record), gpu)
        if found is None:
            line = f"no bench record with a {speed_record.SECTION} section names {gpu}: the mutants are not checked"
            print(f"speed check: {NOT_CHECKED.upper()}: {line}")
            return NOT_CHECKED_EXIT, {"gpu": gpu, "status": NOT_CHECKED, "lines": [line]}
        path, record = found
        reference, stated = speed_record.reference_and_margin(
            record, path, speed_record.floor_of(read_records(args.floor), gpu))
    except speed_record.RecordError as exc:
        print(f"speed check: {FAIL.upper()}: {exc}")
        return 1, {"gpu": gpu, "status": FAIL, "lines": [str(exc)]}
    margin = stated.value
    print(f"  {stated.line(path)}", flush=True)
    routing.prepare(True)
    now = speed.measure(routing.route)
    kernel_now = {(n, b): now[n][str(b)] for n, b in SHAPES if not isinstance(now[n].get(str(b)), dict)}
    rows, errors = [], 0
    with tempfile.TemporaryDirectory() as folder:
        for mutant, reason in args.selected:
            file = Path(folder) / (mutant.name.replace(".", "_") + ".py")
            try:
                file.write_text(mutant.apply((KERNEL_DIR / mutant.target).read_text()))
                route, prepare = speed.load(file)
                prepare(True)
                figures = speed.measure(route)
            except Exception as exc:  # noqa: BLE001 - reported; the other mutants still run
                failed = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
                figures = {n: {str(b): failed for m, b in SHAPES if m == n} for n in speed_record.VARIANTS}
            errors += any(isinstance(figures[n].get(str(b)), dict) for n, b in SHAPES)
            outcome = speed_record.compare(reference, margin, figures, path)
            row = {"name": mutant.name, "reason": reason, "status": outcome.status, "lines": list(outcome.lines),
                   "worst_vs_record": _worst(figures, reference), "worst_vs_kernel_now": _worst(figures, kernel_now)
                   if len(kernel_now) == len(SHAPES) else None}
            rows.append(row)
            print(f"  {'CAUGHT' if outcome.status == FAIL else 'missed'} {mutant.name}: slowest shape "
                  f"{_change(row['worst_vs_record'])} against {path} (margin {margin:.1%}); against the kernel now "
                  f"{_change(row['worst_vs_kernel_now'])}", flush=True)
    caught = sum(r["status"] == FAIL for r in rows)
    print(f"speed check on the time-only mutants: {caught} of {len(rows)} caught ({gpu}, {path}, margin {margin:.1%}); "
          f"{errors} not measured in full")
    return (1 if errors else 0), {"gpu": gpu, "record": path, "margin": margin, "margin_parts": stated.as_json(),
                                  "kernel_now_us": now,
                                  "caught": caught, "of": len(rows), "mutants": rows}


def _refused(argument, problem):
    """A bad --spread, --planted or --record: one line naming it, exit 2."""
    print(f"python -m properties.tools.speed: error: {argument}: {problem}".splitlines()[0], file=sys.stderr)
    return 2


def spread(args):
    """--spread: the spread record of the logs and the bench record, written to args.out."""
    bench_path = args.record[0]
    try:
        bench = json.loads(bench_path.read_text())
        speed_record.bench_rounds(bench, bench_path)
    except (OSError, ValueError) as exc:
        return _refused("--record", f"{bench_path}: {exc}" if isinstance(exc, json.JSONDecodeError) else exc)
    made_by = " ".join(["python -m properties.tools.speed --spread", *map(str, args.spread), "--record",
                        str(bench_path)] + (["--planted", str(args.planted)] if args.planted else [])
                       + ["--out", shown(args.out)])
    try:
        record = speed_record.spread_record(
            bench, bench_path, [(p, p.read_text()) for p in args.spread],
            (args.planted, args.planted.read_text()) if args.planted else None, made_by)
    except (OSError, ValueError, KeyError, TypeError) as exc:  # each message starts with the log it is about
        of_spread = any(str(exc).startswith(str(log)) for log in args.spread)  # the logs are read before --planted
        return _refused("--planted" if args.planted is not None and not of_spread else "--spread", exc)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    widest = record["widest"]
    print(f"speed spread: {len(record['processes'])} processes on {record['provenance']['gpu']}, the widest "
          f"{widest['relative']:.2%} ({widest['shape']}): floor {speed_record.MARGIN_FACTOR * widest['relative']:.2%};"
          f" written to {args.out}")
    return 0


def parse_args(argv):
    parser = OneLineParser(prog="python -m properties.tools.speed", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--kernel", type=types.existing_file, default=None, help="a copy of kernel/routing.py")
    what.add_argument("--mutants", nargs="*", default=None, metavar="NAME",
                      help="the time-only equivalent mutants (all, or those named)")
    parser.add_argument("--record", nargs="+", type=types.existing_file, default=None,
                        help=f"bench records (default {RECORDS_DIR.relative_to(REPO_ROOT)}/{RECORDS_GLOB})")
    parser.add_argument("--floor", nargs="+", type=types.existing_file, default=None,
                        help=f"spread records (default {shown(RECORDS_DIR)}/{speed_record.SPREAD_GLOB})")
    parser.add_argument("--json", type=types.output_file, default=None, help="write the outcome here")
    what.add_argument("--spread", nargs="+", type=types.existing_file, default=None, metavar="LOG",
                      help="write a spread record from these speed checks' output (with --record BENCH.json, --out)")
    parser.add_argument("--planted", type=types.existing_file, default=None,
                        help="--spread: a speed check's output on the planted slower kernel")
    parser.add_argument("--out", type=types.output_file, default=None, help="--spread: the spread record to write")
    args = parser.parse_args(argv)
    if args.spread is not None:
        if args.out is None or args.record is None or len(args.record) != 1:
            parser.error("argument --spread: needs --out FILE and --record BENCH.json (one bench record)")
        return args
    if args.planted is not None or args.out is not None:
        parser.error("arguments --planted and --out go with --spread")
    if args.kernel is not None and args.kernel.suffix != ".py":
        parser.error(f"argument --kernel: {args.kernel} is not a .py file")
    if args.mutants is not None:
        try:
            args.selected = time_only_mutants(args.mutants)
        except ValueError as exc:
            parser.error(str(exc))
    args.record = args.record or sorted(RECORDS_DIR.glob(RECORDS_GLOB))
    args.floor = args.floor or speed_record.spread_paths()
    if cuda_reason():
        parser.error(f"the speed check times the kernel on a GPU: {cuda_reason()}")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.spread is not None:
        return spread(args)
    from properties.bench import speed

    gpu = speed.gpu_name()
    status, outcome = (mutants if args.mutants is not None else check)(args, gpu)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(outcome, indent=1) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(interrupts.run("python -m properties.tools.speed", main))
