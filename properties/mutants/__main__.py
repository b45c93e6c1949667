"""`make mutants`: edit the real kernel's source in known-wrong ways and show that `make verify`'s checks
catch every edit (the catalog: properties/mutants/catalog.py).

    python -m properties.mutants [--tier cpu|gpu|auto] [--only NAME ...] [--all] [--jobs N] [--report PATH]
    python -m properties.mutants replay [PATH ...]      (GPU; default: every file in corpora/mutants/)

``--tier cpu`` runs the static tier on the mutants that declare it (``--all``: on every mutant); ``--tier
gpu`` runs both tiers on every mutant, minimises each differential kill and saves it to
corpora/mutants/<mutant>.json (a case file, the mutant's outputs recorded as "mutant:<name>"). Misuse (an
unknown mutant, the GPU tier or replay without CUDA, a missing case file) gives one line and exit 2.
"""

import argparse
import sys
from pathlib import Path

from oracles.provenance import cuda_reason
from properties.mutants import runner
from properties.mutants.catalog import CATALOG
from properties.mutants.probe import CORPUS_DIR
from properties.tools.args import OneLineParser



def _positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _replay(argv):
    parser = OneLineParser(prog="mutants replay", description="Replay saved minimal cases on the GPU: the real kernel "
                     "must match the model on all of them, each file's mutant must not.")
    parser.add_argument("paths", nargs="*", type=Path, help="case files (default: every file in corpora/mutants/)")
    args = parser.parse_args(argv)
    paths = args.paths or sorted(CORPUS_DIR.glob("*.json"))
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        parser.error(f"no such case file: {', '.join(missing)}")
    if cuda_reason():
        parser.error(f"replay runs the kernel: {cuda_reason()}")
    return 0 if runner.replay(paths) else 1


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["replay"]:
        return _replay(argv[1:])
    parser = OneLineParser(prog="mutants", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", choices=("cpu", "gpu", "auto"), default="auto")
    parser.add_argument("--only", nargs="+", default=(), metavar="NAME", help="run only these mutants")
    parser.add_argument("--all", action="store_true", help="CPU tier: run the static checks on every mutant")
    parser.add_argument("--jobs", type=_positive, default=None, help="probes at a time (default: cores, at most 8)")
    parser.add_argument("--report", default=str(runner.DEFAULT_REPORT))
    args = parser.parse_args(argv)
    unknown = sorted(set(args.only) - {m.name for m in CATALOG})
    if unknown:
        parser.error(f"--only: no mutant named {', '.join(unknown)} (see properties/mutants/catalog.py)")
    if args.tier == "gpu" and cuda_reason():
        parser.error(f"--tier gpu: {cuda_reason()}")
    record = runner.run(args.tier, args.only, args.all, args.jobs, args.report)
    return 0 if record["verdict"] == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
