"""Test-session policy: an honest CPU, visible GPU skips, and the Hypothesis profiles."""

import os

import pytest
from hypothesis import HealthCheck, settings

from oracles.fpenv import assert_subnormals_kept

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


def _cuda_device_reason():
    """None when a CUDA device is usable, else why not."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is a dependency
        return f"torch not importable ({exc})"
    if not torch.cuda.is_available():
        return "no CUDA device on this machine"
    return None


_counter = {"skipped": 0}


def pytest_collection_modifyitems(config, items):
    reason = _cuda_device_reason()
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


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, "workeroutput"):
        return
    n = _counter["skipped"]
    if n:
        terminalreporter.write_line(f"{n} GPU checks did not run (no CUDA device): not counted as passed",
                                    yellow=True, bold=True)
    else:
        terminalreporter.write_line("every GPU check selected in this run ran", green=True)
