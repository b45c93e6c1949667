"""Which JSON file feeds each section of the report, and reading it.

A section reads the file this machine's last run wrote (the reports folder) and, where there is none, the
result recorded under properties/results/ (said so on the page). Reading is strict: a file that is not a JSON
object, or lacks what its section shows, raises ValueError naming the file and the key.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from common.provenance import REPO_ROOT
from properties.bench.results_file import check_schema
from properties.mutants import freshness
from properties.mutants.harness_run import RESULTS as HARNESS_RESULTS
from properties.tools.gate import REPORTS as GATE_REPORTS

RESULTS = REPO_ROOT / "properties" / "results"
REPORTS = REPO_ROOT / "reports"
VERIFY = GATE_REPORTS[0]
# properties/soak/__main__.py DEFAULT_SUMMARY (not imported: that module loads torch); a CPU test holds them equal.
SOAK = "soak.json"
# properties/bench/cli.py DEFAULT_OUT (not imported: that module loads torch); a CPU test holds them equal.
BENCH = "bench.json"
RECORDED_BENCH = RESULTS / "bench.json"
# Per-implementation verdicts (issue 21's plug-in interface): any reports/verdict-*.json is shown.
VERDICTS = "verdict-*.json"

# The keys each kind of file must hold for its section (nested keys joined by dots).
_REQUIRED = {
    "verify": ("verdict", "reasons", "tier", "tests.groups"),
    "mutants": ("kind", "verdict", "tier", "provenance", "score.total"),
    "harness_mutants": ("verdict", "mutants"),
    "soak": ("format", "tally.rows", "tally.rows_by_family", "tally.rows_by_variant", "tally.disagreements"),
    "soak_bench": ("bench",),
    "bench": (),
    "verdicts": (),
}


@dataclass(frozen=True)
class Source:
    """One file shown on the page: its path, its contents, and whether it is a recorded result (not this
    machine's run)."""

    path: Path
    data: dict
    recorded: bool


def read_json(path):
    """The JSON object at ``path``; ValueError (one line naming the file) when it is not one."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror}") from exc
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON: {str(exc).splitlines()[0]}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def is_soak_bench(data):
    """True for a soak --bench file (rows/s per implementation), False for a run's summary."""
    return "bench" in data and "format" not in data


def kind_of(section, data):
    """The kind of file ``data`` is in ``section``: a soak section holds run summaries and --bench files."""
    return "soak_bench" if section == "soak" and is_soak_bench(data) else section


def check(data, kind, path):
    """``data`` unchanged when it holds every key ``kind`` needs; ValueError naming the file and key otherwise."""
    for key in _REQUIRED[kind]:
        node = data
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                raise ValueError(f"{path}: {key} missing (not a {kind.replace('_', ' ')} file)")
            node = node[part]
    if kind == "bench":
        try:
            check_schema(data)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from exc
    return data


def _recorded_verify():
    """The newest gate record under properties/results/ (by the date its tests finished)."""
    records = [(read_json(p), p) for p in sorted(RESULTS.glob("verify-*.json"))]
    dated = [(d["tests"].get("finished", ""), p) for d, p in records if "tests" in d and "verdict" in d]
    return [max(dated)[1]] if dated else []


def default_paths(reports=REPORTS):
    """section -> (paths, recorded): this machine's reports where they exist, else the recorded results."""
    reports = Path(reports)

    def run_or(run_paths, recorded_paths):
        run_paths = [p for p in run_paths if p.is_file()]
        return (run_paths, False) if run_paths else ([p for p in recorded_paths if p.is_file()], True)

    return {
        "verify": run_or([reports / VERIFY], _recorded_verify()),
        "bench": run_or([reports / BENCH], [RECORDED_BENCH]),
        "mutants": ([freshness.EVIDENCE] if freshness.EVIDENCE.is_file() else [], True),  # the committed record
        "harness_mutants": run_or([reports / Path(HARNESS_RESULTS).name], [HARNESS_RESULTS]),
        "soak": run_or([reports / SOAK], sorted(RESULTS.glob("soak-*.json"))),
        "verdicts": (sorted(reports.glob(VERDICTS)), False),
    }


def load(paths):
    """section -> [Source] for ``paths`` (section -> (paths, recorded)); ValueError on the first bad file."""
    loaded = {}
    for section, (files, recorded) in paths.items():
        datas = [(Path(p), read_json(p)) for p in files]
        loaded[section] = [Source(p, check(d, kind_of(section, d), p), recorded) for p, d in datas]
    return loaded
