"""One case file as a page: per row the 256 experts, every implementation's picks, differing weights' bits,
the metadata by field (properties/report/case.py).

    python -m properties.view CASE.json [--out OUT]

Writes OUT (default reports/case-<name>.html) with its figures in a folder beside it and prints its path.
Exit status: 0 written, 1 not written because matplotlib or jinja2 is missing (one line says which), 2 on bad
arguments or a file that is not a case file (one line naming it, before anything is written).
"""

if __name__ == "__main__":  # Ctrl-C while the imports below load: one line, never a traceback
    from common.interrupts import at_start
    at_start("view")

import sys
from pathlib import Path

from common import interrupts
from properties.engine import casefile
from properties.report import page
from properties.report import libraries
from properties.report.sources import REPORTS
from common.args import OneLineParser, check_output_of

NOT_WRITTEN = 1


def main(argv=None):
    parser = OneLineParser(prog="view", description=__doc__.splitlines()[0])
    parser.add_argument("case", type=Path, help="a case file (corpora/README.md)")
    parser.add_argument("--out", type=Path, help="the page to write (default: reports/case-<name>.html)")
    args = parser.parse_args(argv)
    html = args.out or REPORTS / f"case-{args.case.stem}.html"
    if html.is_dir() or html.suffix != ".html":
        parser.error(f"--out {html}: must name an .html file")
    check_output_of(parser, "--out", html)
    check_output_of(parser, "--out", page.image_folder(html), folder=True)
    try:
        record = casefile.read(args.case)
    except casefile.CaseFileError as exc:
        parser.error(str(exc))
    except OSError as exc:
        parser.error(f"{args.case}: {exc.strerror}")
    lacking = libraries.not_written("page")
    if lacking:
        print(lacking)
        return NOT_WRITTEN
    from properties.report import case

    print(f"view: {case.write(record, args.case, html)}")
    return 0


if __name__ == "__main__":
    sys.exit(interrupts.run("view", main))
