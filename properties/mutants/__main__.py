"""`make mutants`: edit the real kernel's source in known-wrong ways and show that `make verify`'s checks
catch every edit (the catalog: properties/mutants/catalog.py).

    python -m properties.mutants [--tier cpu|gpu|auto] [--only NAME ...] [--all] [--jobs N] [--report PATH]
    python -m properties.mutants replay [PATH ...]      (default: every file in corpora/mutants/)

``--tier cpu`` runs the static tier on the mutants that declare it (``--all``: on every mutant); ``--tier
gpu`` runs both tiers on every mutant, minimises each differential kill and saves it to
corpora/mutants/<mutant>.json (a case file, the mutant's outputs recorded as "mutant:<name>").
"""

import argparse
import sys

from properties.mutants import runner
from properties.mutants.probe import CORPUS_DIR


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["replay"]:
        paths = argv[1:] or sorted(map(str, CORPUS_DIR.glob("*.json")))
        return 0 if runner.replay(paths) else 1
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", choices=("cpu", "gpu", "auto"), default="auto")
    parser.add_argument("--only", nargs="*", default=(), help="run only these mutants")
    parser.add_argument("--all", action="store_true", help="CPU tier: run the static checks on every mutant")
    parser.add_argument("--jobs", type=int, default=None, help="probes at a time (default: cores, at most 8)")
    parser.add_argument("--report", default=str(runner.DEFAULT_REPORT))
    args = parser.parse_args(argv)
    record = runner.run(args.tier, args.only, args.all, args.jobs, args.report)
    return 0 if record["verdict"] == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
