"""Test-session policy: an honest CPU, visible GPU skips, and the Hypothesis profiles."""

import json
import os
import time

import pytest
from hypothesis import HealthCheck, settings

from oracles.fpenv import assert_subnormals_kept
from oracles.provenance import cuda_reason

# A library built with -ffast-math can switch FTZ/DAZ on for the whole process; every float comparison
# against the hardware would then be wrong. Checked before any test is collected.
assert_subnormals_kept()

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile("ci", max_examples=100, deadline=None, suppress_health_check=_SLOW_OK,
                          derandomize=True, print_blob=True)
settings.register_profile("dev", max_examples=50, deadline=None, suppress_health_check=_SLOW_OK,
                          print_blob=True)
settings.register_profile("gpu", max_examples=3000, deadline=None, suppress_health_check=_SLOW_OK,
                          print_blob=True)
settings.register_profile("nightly", max_examples=100_000, deadline=None, suppress_health_check=_SLOW_OK,
                          print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


_counter = {"skipped": 0}

# Which part of the harness a test file checks, for the gate's summary (first matching prefix wins).
GROUPS = (
    ("tests/test_model_", "numpy model"),
    ("tests/test_mufu_", "numpy model"),
    ("tests/test_fpenv", "numpy model"),
    ("tests/test_triton_", "triton oracle"),
    ("tests/test_ptx_", "triton oracle"),
    ("tests/test_flashinfer_", "flashinfer oracle"),
    ("tests/test_kernel_", "cute kernel"),
    ("tests/test_cross_oracles", "cross-oracle"),
    ("tests/test_properties_", "properties"),
    ("tests/test_corpus", "corpus replay"),
    ("tests/test_mutants", "mutants"),
    ("tests/test_bundle", "gpu bundle"),
    ("tests/test_bench", "benchmark"),
    ("tests/test_layers", "layering"),
)
_gate = {}


def group_of(nodeid):
    """The harness part a test belongs to (its file's prefix in GROUPS), else "other"."""
    return next((name for prefix, name in GROUPS if nodeid.startswith(prefix)), "other")


@pytest.fixture
def cases(request):
    """Call ``cases(n)`` in a test to report that it compared n cases (summed per group by the gate)."""

    def record(n):
        request.node.user_properties.append(("cases", int(n)))

    return record


def pytest_addoption(parser):
    parser.addoption("--gate-report", default=None, help="write a per-group JSON summary of this run here")


def pytest_collection_modifyitems(config, items):
    reason = cuda_reason()
    if reason is None:
        return
    marker = pytest.mark.skip(reason=f"GPU check not run: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(marker)


def pytest_runtest_logreport(report):
    """Counts in the controlling process too: under xdist it receives every worker's reports."""
    if report.skipped and "gpu" in report.keywords and report.when in ("setup", "call"):
        _counter["skipped"] += 1
    if report.when == "call" or (report.when == "setup" and not report.passed):
        g = _gate.setdefault(group_of(report.nodeid), {"passed": 0, "failed": 0, "skipped": 0, "cases": 0,
                                                       "seconds": 0.0, "skip_reasons": {}, "failures": []})
        g["seconds"] += report.duration
        g["cases"] += sum(v for k, v in report.user_properties if k == "cases")
        if report.skipped:
            g["skipped"] += 1
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            g["skip_reasons"][reason] = g["skip_reasons"].get(reason, 0) + 1
        elif report.failed:
            g["failed"] += 1
            g["failures"].append(report.nodeid)
        else:
            g["passed"] += 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, "workeroutput"):
        return
    path = config.getoption("--gate-report")
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump({"exitstatus": int(exitstatus), "groups": _gate, "gpu_checks_not_run": _counter["skipped"],
                       "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, f, indent=1)
    n = _counter["skipped"]
    if n:
        terminalreporter.write_line(f"{n} GPU checks did not run (no CUDA device): not counted as passed",
                                    yellow=True, bold=True)
    else:
        terminalreporter.write_line("every GPU check selected in this run ran", green=True)
