"""Test-session policy: an honest CPU, visible GPU skips, and the Hypothesis profiles."""

import json
import os
import time
from pathlib import Path

from properties.tools.gpu_groups import pin_worker

pin_worker(os.environ)  # before anything touches CUDA: a gate worker sees only its group's GPU

import pytest  # noqa: E402
from hypothesis import settings

from common.fpenv import assert_subnormals_kept
from common.provenance import cuda_reason
from properties.engine import compare
from properties.tools import depths, order, profiles, progress
from properties.tools.gate import GPU_NOT_RUN, named_skip, write_whole

# A library built with -ffast-math can switch FTZ/DAZ on for the whole process; every float comparison
# against the hardware would then be wrong. Checked before any test is collected.
assert_subnormals_kept()

profiles.register()  # loaded in pytest_configure, once the profile asked for is known to exist

_SKIP_PREFIX = "Skipped: "
_session = {"named": {}, "unnamed": [], "progress": None, "config": None, "gpu_passed": 0}

# Which part of the harness a test file checks, for the gate's summary (first matching prefix wins).
GROUPS = (
    ("tests/test_model_", "numpy model"),
    ("tests/test_mufu_", "numpy model"),
    ("tests/test_fpenv", "numpy model"),
    ("tests/test_triton_", "triton oracle"),
    ("tests/test_ptx_", "triton oracle"),
    ("tests/test_flashinfer_", "flashinfer oracle"),
    ("tests/test_kernel_", "cute kernel"),
    ("tests/test_contract_", "cute kernel"),
    ("tests/test_torch_op", "cute kernel"),
    ("tests/test_cross_oracles", "cross-oracle"),
    ("tests/test_properties_", "properties"),
    ("tests/test_invariants", "properties"),
    ("tests/test_soak", "soak"),
    ("tests/test_corpus", "corpus replay"),
    ("tests/test_casefile", "corpus replay"),
    ("tests/test_mutants", "mutants"),
    ("tests/test_harness_mutants", "mutants"),
    ("tests/test_bundle", "gpu bundle"),
    ("tests/test_gate", "gate"),
    ("tests/test_product", "gate"),
    ("tests/test_gpu_groups", "gate"),
    ("tests/test_bench", "benchmark"),
    ("tests/test_layers", "layering"),
    ("tests/test_report", "report"),
)
_gate = {}


def group_of(nodeid):
    """The harness part a test belongs to (its file's prefix in GROUPS), else "other"."""
    return next((name for prefix, name in GROUPS if nodeid.startswith(prefix)), "other")


def _group(nodeid):
    """The gate's counts for the part ``nodeid`` belongs to."""
    return _gate.setdefault(group_of(nodeid), {"passed": 0, "failed": 0, "skipped": 0, "cases": 0, "seconds": 0.0,
                                               "skip_reasons": {}, "failures": []})


@pytest.fixture
def cases(request):
    """Call ``cases(n)`` in a test to report that it compared n cases (summed per group by the gate)."""

    def record(n):
        request.node.user_properties.append(("cases", int(n)))

    return record


def pytest_addoption(parser):
    parser.addoption("--gate-report", default=None, help="write a per-group JSON summary of this run here")
    parser.addoption("--gate-progress", default=None,
                     help="append the tests done and failures to this file (properties/tools/progress.py)")
    parser.addoption("--verify-impl", action="append", default=[], metavar="NAME=MODULE:ATTR",
                     help="a plug-in for the tests meant for plug-ins (the gate hands over VERIFY_IMPL's specs so)")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Refuse an unknown profile (HYPOTHESIS_PROFILE's too), or a seed that the profile would ignore, before
    any test runs; then load the profile."""
    environment = os.environ.get(profiles.ENV)
    if environment is not None and environment not in profiles.PROFILES:
        raise pytest.UsageError(f"{profiles.ENV}: {profiles.problem(environment, False)}")
    profile = config.getoption("hypothesis_profile", None) or environment or profiles.DEFAULT
    problem = profiles.problem(profile, config.getoption("hypothesis_seed", None) is not None)
    if problem:
        raise pytest.UsageError(problem)
    settings.load_profile(profile)
    if config.getoption("--verify-impl"):
        from properties.engine import implementations

        implementations.configure(config.getoption("--verify-impl"))
    _session["progress"] = progress.Writer.for_config(config, config.getoption("--gate-progress"))
    _session["config"] = config


def pytest_collection_finish(session):
    """Without pytest-xdist (under it the controller collects nothing: see the next hook)."""
    if _session["progress"] is not None:
        _session["progress"].set_collected(len(session.items))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """Under pytest-xdist the controller collects nothing itself: every worker reports the same ids."""
    if _session["progress"] is not None and _session["progress"].collected is None:
        _session["progress"].set_collected(len(ids))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """Report the cases the harness's comparison compared in the test (properties/engine/compare.py), for the
    gate's "cases" column, unless the test reported its own through the ``cases`` fixture."""
    before = compare.compared_cases()
    yield
    compared = compare.compared_cases() - before
    if compared and not any(name == "cases" for name, _ in item.user_properties):
        item.user_properties.append(("cases", compared))


@pytest.hookimpl(tryfirst=True)  # before pytest's -m deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if depths.is_deep(item.nodeid):
            item.add_marker(depths.DEEP_MARKER)
        if depths.is_self_test(item.nodeid):
            item.add_marker(depths.SELF_TEST_MARKER)
    items[:] = order.dealt(items, lambda item: "long" in item.keywords, order.workers(config))
    reason = cuda_reason()
    if reason is None:
        return
    marker = pytest.mark.skip(reason=f"{GPU_NOT_RUN}: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(marker)


def _skip_reason(report):
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if hasattr(report, "wasxfail"):
        return f"xfail: {report.wasxfail}"
    return reason[len(_SKIP_PREFIX):] if reason.startswith(_SKIP_PREFIX) else reason


def _count_skip(report, reason):
    named = named_skip(reason)
    if named is None:
        _session["unnamed"].append({"test": report.nodeid, "reason": reason})
    else:
        _session["named"][named] = _session["named"].get(named, 0) + 1


def _note_progress(report):
    """In the controller under the gate: count the test when its teardown is reported, and name a failure
    at once (on the terminal and in the progress file)."""
    writer = _session["progress"]
    if writer is None:
        return
    if report.failed:
        test = writer.failed(report.nodeid, report.when)
        terminal = _session["config"].pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:  # None under -p no:terminal: the progress file still names it
            terminal.write("\n")  # off the line of progress letters (-q) that write_line would continue
            terminal.write_line(f"gate: FAILED {test}", red=True, bold=True)
            terminal.flush()
    if report.when == "teardown":
        writer.test_done()


def pytest_runtest_logreport(report):
    """Counts in the controlling process too: under xdist it receives every worker's reports."""
    _note_progress(report)
    if report.when == "call" or (report.when == "setup" and not report.passed):
        g = _group(report.nodeid)
        g["seconds"] += report.duration
        g["cases"] += sum(v for k, v in report.user_properties if k == "cases")
        if report.skipped:
            reason = _skip_reason(report)
            _count_skip(report, reason)
            g["skipped"] += 1
            g["skip_reasons"][reason] = g["skip_reasons"].get(reason, 0) + 1
        elif report.failed:
            g["failed"] += 1
            g["failures"].append(report.nodeid)
        else:
            g["passed"] += 1
            _session["gpu_passed"] += report.when == "call" and "gpu" in report.keywords


def pytest_collectreport(report):
    """A module skipped at collection (``pytest.skip(allow_module_level=True)``, ``importorskip``) counts as a
    skip of its file, named or unnamed like any other, so the gate cannot pass it silently."""
    if report.skipped:
        reason = _skip_reason(report)
        _count_skip(report, reason)
        g = _group(report.nodeid)
        g["skipped"] += 1
        g["skip_reasons"][reason] = g["skip_reasons"].get(reason, 0) + 1


def _ran():
    """Tests that passed or failed in this session (skipped and deselected ones are not)."""
    return sum(g["passed"] + g["failed"] for g in _gate.values())


def pytest_sessionfinish(session, exitstatus):
    """A session that verified nothing (every selected test skipped or deselected) does not exit 0: pytest's
    own status would pass it; the terminal summary's last line says why."""
    if progress.is_worker(session.config) or session.config.option.collectonly:
        return
    if exitstatus == pytest.ExitCode.OK and not _ran():
        session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if progress.is_worker(config):
        return
    path = config.getoption("--gate-report")
    gpu_not_run = _session["named"].get(GPU_NOT_RUN, 0)
    ran = _ran()
    if path:
        record = {"exitstatus": int(exitstatus), "groups": _gate, "ran": ran, "gpu_checks_not_run": gpu_not_run,
                  "gpu_checks_passed": _session["gpu_passed"],
                  "named_skips": _session["named"], "unnamed_skips": _session["unnamed"],
                  "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_whole(Path(path), json.dumps(record, indent=1))
    for name, n in _session["named"].items():
        terminalreporter.write_line(f"{n} tests skipped: {name} (not counted as passed)", yellow=True, bold=True)
    for skip in _session["unnamed"]:
        terminalreporter.write_line(f"unexpected skip (fails the gate): {skip['test']}: {skip['reason']}",
                                    red=True, bold=True)
    if not ran:
        terminalreporter.write_line("no check ran: nothing was verified", red=True, bold=True)
    elif not _session["named"] and not _session["unnamed"]:
        terminalreporter.write_line("every check selected in this run ran", green=True)
