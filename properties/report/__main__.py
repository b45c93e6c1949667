"""Write the run's report page, one static HTML file with its figures beside it (no server, no network).

    python -m properties.report [--reports DIR] [--out FILE] [--verify F] [--bench F] [--mutants F]
                                [--harness-mutants F] [--soak F ...] [--verdict F ...]

Each section reads the file named for it, else this machine's last run in DIR (default reports/), else the
result recorded under properties/results/. `make verify`, `make soak` and `make bench` run it after their
own command, whatever that returned, so their exit status is theirs alone; `make report` runs it alone.
Exit status: 0 written, 1 not written because matplotlib or jinja2 is missing (one line says which), 2 on bad
arguments or an unreadable file (one line naming it, before anything is written).
"""

if __name__ == "__main__":  # Ctrl-C while the imports below load: one line, never a traceback
    from common.interrupts import at_start
    at_start("report")

import argparse
import sys
from pathlib import Path

from common import interrupts
from common.args import OneLineParser, check_output_of
from properties.report import libraries, page

NOT_WRITTEN = 1


def parse(argv):
    from properties.report import sources

    parser = OneLineParser(prog="report", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reports", type=Path, default=sources.REPORTS, help="this machine's reports folder")
    parser.add_argument("--out", type=Path, help="the page (default: DIR/index.html)")
    for section in ("verify", "bench", "mutants", "harness-mutants"):
        parser.add_argument(f"--{section}", type=Path, metavar="FILE")
    parser.add_argument("--soak", type=Path, nargs="+", metavar="FILE")
    parser.add_argument("--verdict", type=Path, nargs="+", metavar="FILE", help="per-implementation verdicts")
    args = parser.parse_args(argv)
    if args.reports.exists() and not args.reports.is_dir():
        parser.error(f"--reports {args.reports}: not a folder")
    option = "--out" if args.out else "--reports"
    args.out = args.out or args.reports / "index.html"
    if args.out.is_dir() or args.out.suffix != ".html":
        parser.error(f"--out {args.out}: must name an .html file")
    check_output_of(parser, option, args.out)
    check_output_of(parser, option, page.image_folder(args.out), folder=True)
    return args


def paths(args):
    """section -> (paths, recorded): the files named on the command line, else the defaults."""
    from properties.report import sources

    chosen = sources.default_paths(args.reports)
    named = {"verify": args.verify, "bench": args.bench, "mutants": args.mutants,
             "harness_mutants": args.harness_mutants, "soak": args.soak, "verdicts": args.verdict}
    for section, value in named.items():
        if value is not None:
            chosen[section] = (value if isinstance(value, list) else [value], False)
    return chosen


def main(argv=None):
    args = parse(argv)
    lacking = libraries.not_written("report")
    if lacking:
        print(lacking)
        return NOT_WRITTEN
    from properties.report import index, sources

    try:
        loaded = sources.load(paths(args))
    except ValueError as exc:
        print(f"report: error: {exc}", file=sys.stderr)
        return 2
    print(f"report: {index.write(loaded, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(interrupts.run("report", main))
