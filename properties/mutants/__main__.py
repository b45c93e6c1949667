"""`make mutants`: edit the real kernel's source in known-wrong ways and show that `make verify`'s checks
catch every edit (the catalog: properties/mutants/catalog.py).

    python -m properties.mutants [--tier cpu|gpu|auto] [--only NAME ...] [--all] [--jobs N] [--report PATH]
                                 [--reuse TABLE]
    python -m properties.mutants replay [PATH ...]      (GPU; default: every file in corpora/mutants/)
    python -m properties.mutants generated [--tier cpu|gpu|auto] [--only NAME ...] [--jobs N] [--out PATH]
                                           [--resume PATH] [--seconds S] [--list]
                                           (the mutants generated from the kernel's code: generate.py, generated.py)

``--tier cpu`` runs the CPU tiers on the mutants that declare them: static for the kernel's mutants
(``--all``: on every kernel mutant), contract-cpu for the contract's; ``--tier gpu`` runs every tier of its
family on every mutant (static and differential, or contract-cpu and contract-gpu), minimises each
differential kill and saves it to
reports/mutants/<mutant>.json (a case file, the mutant's outputs recorded as "mutant:<name>"; `make
mutants-corpus` copies them into the committed corpora/mutants/). Misuse (an
unknown mutant, the GPU tier or replay without CUDA, a missing case file or one that is not a case file, a
selection that runs no mutant in the chosen tier, a --report naming a folder) gives one line and exit 2
before anything runs. Exit 1 when a mutant survives a declared tier, the real kernel fails, or no mutant was
run after all.
"""

if __name__ == "__main__":  # Ctrl-C while the imports below load: one line, never a traceback
    from common.interrupts import at_start
    at_start("python -m properties.mutants")

import argparse
from pathlib import Path
import sys

from common.provenance import cuda_reason
from properties.engine import casefile
from properties.mutants import runner
from properties.mutants.catalog import CATALOG
from properties.mutants.probe import CORPUS_DIR
from common import args as types
from common import interrupts, records
from common.args import OneLineParser

MAX_JOBS = 64
# What --reuse and generated --resume read of a record (common/records.py).
KILL_TABLE_SCHEMA = Path(__file__).with_name("kill-table.schema.json")
GENERATED_SCHEMA = Path(__file__).with_name("generated.schema.json")


def ran_a_mutant(record):
    """Whether any mutant of ``record`` (runner.run's) was probed in at least one tier."""
    return any(set(row["tiers"]) - set(row["not_run"]) for row in record["mutants"])


def _replay(argv):
    parser = OneLineParser(prog="mutants replay", description="Replay saved minimal cases on the GPU: the real kernel "
                     "must match the model on all of them, each file's mutant must not.")
    parser.add_argument("paths", nargs="*", type=types.existing_file,
                        help="case files (default: every file in corpora/mutants/)")
    args = parser.parse_args(argv)
    paths = args.paths or sorted(CORPUS_DIR.glob("*.json"))
    if not paths:
        parser.error(f"no case files in {CORPUS_DIR}: nothing to replay")
    for path in paths:
        try:
            casefile.read(path)
        except casefile.CaseFileError as exc:
            parser.error(f"cannot read {exc}")
    if cuda_reason():
        parser.error(f"replay runs the kernel: {cuda_reason()}")
    return 0 if runner.replay(paths) else 1


def _generated(argv):
    from properties.mutants import generate, generated

    parser = OneLineParser(prog="mutants generated", description="The mutants generated at every site of the "
                           "kernel's code: the CPU prefilter (PTX and launch digests, the static tier), then the tiers "
                           "that call route; the mutation score. Exit 1 unless every non-equivalent mutant is killed.")
    parser.add_argument("--tier", choices=("cpu", "gpu", "auto"), default="auto")
    parser.add_argument("--only", nargs="+", default=(), metavar="NAME",
                        help="these mutants (a name, or a prefix ending at a dot: routing._top_k)")
    parser.add_argument("--jobs", type=types.integer(1, MAX_JOBS), default=None,
                        help="prefilter workers and probes at a time (default: cores, at most 16)")
    parser.add_argument("--out", type=types.output_file, default=str(generated.DEFAULT_OUT),
                        help="the record (default reports/mutants-generated.json)")
    parser.add_argument("--resume", type=types.existing_file, default=None,
                        help="a record whose outcomes are reused where the mutant and the harness are unchanged")
    parser.add_argument("--seconds", type=types.integer(1, 7 * 24 * 3600), default=None,
                        help="start no prefilter batch or probe after this many seconds (go on later with --resume)")
    parser.add_argument("--list", action="store_true", help="print the selected mutants' names and edits; run none")
    args = parser.parse_args(argv)
    try:
        mutants = generated.select(generate.generate(generated.KERNEL_DIR), args.only)
    except ValueError as exc:
        parser.error(str(exc))
    if args.resume:
        try:
            records.read(args.resume, GENERATED_SCHEMA)
        except records.RecordError as exc:
            parser.error(f"--resume: not a generated-mutants record: {exc}")
    if args.tier == "gpu" and cuda_reason():
        parser.error(f"--tier gpu: {cuda_reason()}")
    if args.list:
        for m in mutants:
            print(f"{m.name}  {m.site}  {m.old!r} -> {m.new!r}")
        return 0
    data = generated.run(args.only, args.tier, args.jobs, args.out, args.resume, seconds=args.seconds)
    ran = any(r["tiers"] or (r["prefilter"] or {}).get("compiled") for r in data["mutants"])
    if not ran and not any(r["verdict"] != "not_run" for r in data["mutants"]):
        print("mutants generated: NOTHING RUN: no mutant was probed (exit 1)")
        return 1
    return 0 if data["verdict"] == "PASS" else 1


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["replay"]:
        return _replay(argv[1:])
    if argv[:1] == ["generated"]:
        return _generated(argv[1:])
    parser = OneLineParser(prog="mutants", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", choices=("cpu", "gpu", "auto"), default="auto")
    parser.add_argument("--only", nargs="+", default=(), metavar="NAME", help="run only these mutants")
    parser.add_argument("--all", action="store_true", help="CPU tier: run the static checks on every mutant")
    parser.add_argument("--jobs", type=types.integer(1, MAX_JOBS), default=None,
                        help="probes at a time (default: one per core)")
    parser.add_argument("--report", type=types.output_file, default=str(runner.DEFAULT_REPORT))
    parser.add_argument("--reuse", type=types.existing_file, default=None, metavar="TABLE",
                        help="GPU tier: keep this kill table's rows for mutants whose edit and inputs are unchanged")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.only) - {m.name for m in CATALOG})
    if unknown:
        parser.error(f"--only: no mutant named {', '.join(unknown)} (see properties/mutants/catalog.py)")
    if args.tier == "gpu" and cuda_reason():
        parser.error(f"--tier gpu: {cuda_reason()}")
    tier = args.tier if args.tier != "auto" else "cpu" if cuda_reason() else "gpu"
    if args.reuse is not None:
        if tier != "gpu":
            parser.error(f"--reuse: a kill table's rows are reused by the GPU tier alone, not --tier {tier}")
        try:
            records.read(args.reuse, KILL_TABLE_SCHEMA)
        except records.RecordError as exc:
            parser.error(f"--reuse: not a kill table: {exc}")
    selected = [m for m in CATALOG if not args.only or m.name in args.only]
    tiers = runner.tiers_of(tier)
    if not any(mutant for mutant, _ in runner.plan(selected, tiers, args.all)):
        parser.error(f"{'--only ' + ' '.join(args.only) if args.only else 'the catalog'}: no mutant of the selection is run by --tier {tier} "
                     f"(tiers {', '.join(tiers)}; --all runs the static checks on every mutant)")
    record = runner.run(args.tier, args.only, args.all, args.jobs, str(args.report), reuse=args.reuse)
    if not ran_a_mutant(record):
        print("mutants: NOTHING RUN: no mutant was probed (exit 1)")
        return 1
    return 0 if record["verdict"] == "PASS" else 1


if __name__ == "__main__":
    sys.exit(interrupts.run("python -m properties.mutants", main))
