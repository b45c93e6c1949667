"""The kernel's mutants: edits of the real kernel's source that the checks must catch.

    python -m properties.mutants generated [--tier cpu|gpu|auto] [--only NAME ...] [--jobs N] [--out PATH]
                                           [--resume PATH] [--evidence] [--reviewed NAME ...] [--seconds S] [--list]
                                           (the mutants generated from the kernel's code, the hand-written ones
                                           among them: generate.py, generated.py; --evidence refreshes the
                                           committed evidence record, freshness.py: `make evidence`)
    python -m properties.mutants replay [PATH ...]      (GPU; default: every file in corpora/mutants/)

The differential tier minimises each kill and saves it to reports/mutants/<mutant>.json (a case file, the
mutant's outputs recorded as "mutant:<name>"; `make mutants-corpus` copies them into the committed
corpora/mutants/). Misuse (no or an unknown command, an unknown mutant, the GPU tier or replay without CUDA, a
missing case file or one that is not a case file) gives one line and exit 2 before anything runs. Exit 1 when a
mutant survives, the real kernel fails, or no mutant was run after all.
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
from properties.mutants.probe import CORPUS_DIR
from common import args as types
from common import interrupts, records
from common.args import OneLineParser

MAX_JOBS = 64
# What --reuse and generated --resume read of a record (common/records.py).
GENERATED_SCHEMA = Path(__file__).with_name("generated.schema.json")


def ran_a_mutant(record):
    """Whether any mutant of ``record`` (generated.run's) was compiled or probed, or holds a verdict."""
    return any(row["tiers"] or (row["prefilter"] or {}).get("compiled") or row["verdict"] != "not_run"
               for row in record["mutants"])


def _replay(argv):
    from properties.mutants import generate, generated

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
    return 0 if runner.replay(paths, generate.generate(generated.KERNEL_DIR), generated._copy) else 1


def _generated(argv):
    from properties.mutants import freshness, generate, generated

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
                        help="the record this run refreshes (properties/mutants/refresh.py: what each mutant reruns)")
    parser.add_argument("--evidence", action="store_true",
                        help=f"refresh the committed evidence record: --out {freshness.EVIDENCE.relative_to(freshness.REPO_ROOT)}, "
                             "and --resume it where it exists unless --resume names another; every mutant, --tier gpu")
    parser.add_argument("--reviewed", nargs="+", default=(), metavar="NAME",
                        help="listed equivalents whose changed site a person re-read the reason of")
    parser.add_argument("--seconds", type=types.integer(1, 7 * 24 * 3600), default=None,
                        help="start no prefilter batch or probe after this many seconds (go on later with --resume)")
    parser.add_argument("--list", action="store_true", help="print the selected mutants' names and edits; run none")
    args = parser.parse_args(argv)
    if args.evidence:
        if args.only or args.tier == "cpu":
            parser.error("--evidence: the evidence record holds every mutant through every tier: no --only or "
                         "--tier cpu")
        args.tier, args.out = "gpu", freshness.EVIDENCE
        args.resume = args.resume or (freshness.EVIDENCE if freshness.EVIDENCE.is_file() else None)
    try:
        mutants = generated.select(generate.generate(generated.KERNEL_DIR), args.only)
    except ValueError as exc:
        parser.error(str(exc))
    if args.resume:
        try:
            data = records.read(args.resume, GENERATED_SCHEMA)
            if data.get("kind") != freshness.RECORD_KIND:
                raise records.RecordError(f"{args.resume}: kind: not {freshness.RECORD_KIND!r}")
        except records.RecordError as exc:
            parser.error(f"--resume: not a generated-mutants record: {exc}")
    if args.tier == "gpu" and cuda_reason():
        parser.error(f"--tier gpu: {cuda_reason()}")
    if args.list:
        for m in mutants:
            print(f"{m.name}  {m.site}  {m.old!r} -> {m.new!r}")
        return 0
    unknown = sorted(set(args.reviewed) - set(generated.equivalents.LISTED))
    if unknown:
        parser.error(f"--reviewed: not a listed equivalent: {', '.join(unknown)} (properties/mutants/equivalents.py)")
    data = generated.run(args.only, args.tier, args.jobs, args.out, args.resume, seconds=args.seconds,
                         reviewed=args.reviewed)
    if not ran_a_mutant(data):
        print("mutants generated: NOTHING RUN: no mutant was probed (exit 1)")
        return 1
    return 0 if data["verdict"] == "PASS" else 1


COMMANDS = {"generated": _generated, "replay": _replay}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in COMMANDS:
        return COMMANDS[argv[0]](argv[1:])
    parser = OneLineParser(prog="mutants", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=tuple(COMMANDS), help="the generated run, or the replay of saved cases")
    parser.parse_args(argv[:1])  # no command, or not one of COMMANDS: one line and exit 2 (--help: the usage)
    return 2


if __name__ == "__main__":
    sys.exit(interrupts.run("python -m properties.mutants", main))
