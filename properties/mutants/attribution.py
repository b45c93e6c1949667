"""A pytest plugin for the harness mutants: records, per test, how it ended, so a kill is attributed to an
assertion of the intended test and a crash is told apart.

    python -m pytest -p properties.mutants.attribution ...   (HARNESS_ATTRIBUTION=<path of the JSON written>)

Each failed phase is classed "assertion" when its exception is an AssertionError or pytest's own failure
(``pytest.fail``, ``pytest.raises`` that did not raise, a regex that did not match) raised in the test's own
module or by pytest; anything else (an exception from the code under test, a fixture error, a collection
error) is "raised".
"""

import json
import os
from pathlib import Path

import pytest

ENV = "HARNESS_ATTRIBUTION"
_results = {"tests": {}, "collection_errors": [], "root": None}


def _kind(item, excinfo):
    if excinfo is None:
        return "raised"
    innermost = Path(str(excinfo.traceback[-1].path)) if excinfo.traceback else None
    in_test = innermost is not None and (innermost == Path(str(item.path)) or "_pytest" in innermost.parts)
    asserted = excinfo.errisinstance((AssertionError, pytest.fail.Exception))
    return "assertion" if asserted and in_test else f"raised {excinfo.typename}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    entry = _results["tests"].setdefault(item.nodeid, {"outcome": "passed", "detail": ""})
    if report.failed:
        kind = _kind(item, call.excinfo) if call.when == "call" else f"raised in {call.when}"
        entry.update(outcome="assertion" if kind == "assertion" else "raised",
                     detail=f"{call.when}: {kind}: {str(call.excinfo.value if call.excinfo else '')[:300]}")
    elif report.skipped and entry["outcome"] == "passed":
        entry.update(outcome="skipped", detail=str(report.longrepr)[:300])


def pytest_collectreport(report):
    if report.failed:
        _results["collection_errors"].append(f"{report.nodeid}: {str(report.longrepr)[-300:]}")


def pytest_sessionfinish(session):
    import properties

    _results["root"] = str(Path(properties.__file__).resolve().parent.parent)
    path = os.environ.get(ENV)
    if path:
        Path(path).write_text(json.dumps(_results, indent=1) + "\n")
