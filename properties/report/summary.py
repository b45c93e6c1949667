"""The gate's record as a CI job's summary: reports/verify.json in Markdown, printed.

    python -m properties.report.summary [FILE]    (default reports/verify.json)

A GitHub Actions step appends it to ``$GITHUB_STEP_SUMMARY`` (.github/workflows/gpu.yml): the verdict and its
reasons, the counts, each part's tests, the named skips, the checks the gate ran besides pytest, and where it ran
(GPU, driver, CUDA, commit, date, package versions). Every figure is the record's own (sections.verify reads it).
Exit status: 0 printed, 2 when FILE is unreadable or not a gate record (one line naming it and the field).
"""

import sys
from pathlib import Path

from common.args import OneLineParser
from properties.report import sections, sources

# The gate's checks besides pytest, as its record names them.
CHECKS = (("flashinfer_build", "FlashInfer build"), ("mufu_tables", "MUFU tables"), ("evidence", "evidence record"),
          ("speed_check", "speed check"))


def _row(cells):
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def markdown(data, path):
    """The summary of the gate record ``data`` (read from ``path``); ValueError naming a field it lacks."""
    shown = sections.verify(sources.Source(Path(path), sources.check(data, "verify", path), False), Path(path).parent)
    tests = data["tests"]
    lines = [f"### Gate: {shown['verdict']}", "",
             f"{data.get('depth', 'default')} tests, tier {shown['tier']}, profile {shown['profile']}, "
             f"{shown['seconds']} s{', GPU required' if shown['require_gpu'] else ''}: {tests.get('ran', 0):,} tests "
             f"ran, {tests.get('gpu_checks_passed', 0):,} GPU checks passed, {shown['gpu_checks_not_run'] or 0:,} "
             "GPU checks not run.", ""]
    lines += [f"- {reason}" for reason in shown["reasons"]] + ([""] if shown["reasons"] else [])
    totals = shown["totals"]
    lines += [_row(("part", "passed", "failed", "skipped", "cases", "seconds")), _row(["---"] * 6)]
    lines += [_row((p["name"], p["passed"], p["failed"], p["skipped"], p["cases"], f"{p['seconds']:.1f}"))
              for p in shown["parts"]]
    lines += [_row(("**all**", totals["passed"], totals["failed"], totals["skipped"], totals["cases"], "")), ""]
    failures = [f"- `{failure}`" for p in shown["parts"] for failure in p["failures"]]
    if failures:
        lines += ["Failed:", "", *failures, ""]
    skips = [f"{reason} x {n}" for reason, n in shown["named_skips"].items()] + \
            [f"unnamed: {reason}" for reason in shown["unnamed_skips"]]
    if skips:
        lines += ["Skipped: " + "; ".join(skips) + ".", ""]
    lines += [f"- {label}: {data[key]['why']}" for key, label in CHECKS if (data.get(key) or {}).get("why")]
    lines += ["", _row(shown["environment"]), _row(["---"] * len(shown["environment"])),
              _row(shown["environment"].values())]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = OneLineParser(prog="python -m properties.report.summary", description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path, default=sources.REPORTS / sources.VERIFY,
                        help="the gate's record (default reports/verify.json)")
    args = parser.parse_args(argv)
    try:
        text = markdown(sources.read_json(args.file), args.file)
    except ValueError as exc:
        parser.error(str(exc))
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
