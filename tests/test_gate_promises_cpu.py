"""`make test` and `make verify` keep their promise under misuse: a pytest run that executed no test does not
exit 0, the settings read from the environment (HYPOTHESIS_PROFILE, VERIFY_REQUIRE_GPU, VERIFY_IMPL) are
refused up front in one line, the gate's switches of an outer run reach no test, a refused gate leaves
reports/index.html alone, a missing test file is named in the gate's FAIL reason, and the gate's "cases" column
counts the cases compared."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from common.provenance import REPO_ROOT
from properties.tools import gate

from helpers import GATE_SWITCHES

TIMEOUT_S = 300
GPU_FILE = "tests/test_bench_gpu.py"  # on a CPU: every test a named GPU skip
CPU_FILE = "tests/test_layers_cpu.py"
# The outer run's settings must not decide the runs under test: only each test's own env does.
SETTINGS = ("VERIFY_REQUIRE_GPU", "HYPOTHESIS_PROFILE", "PYTEST_ARGS", "VERIFY_IMPL", "REPORT_ARGS", "GATE_ARGS")


def _env(**extra):
    inherited = {k: v for k, v in os.environ.items() if k not in SETTINGS}
    return {**inherited, "CUDA_VISIBLE_DEVICES": "", **extra}


def _pytest(args, **extra):
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "0", *args],
                          cwd=REPO_ROOT, env=_env(**extra), capture_output=True, text=True, timeout=TIMEOUT_S)


def test_a_pytest_run_whose_every_test_was_skipped_does_not_exit_0():
    """`PYTEST_ARGS=tests/test_kernel_gpu.py make test` on a CPU: every test a GPU skip, nothing verified."""
    result = _pytest([GPU_FILE])
    assert result.returncode != 0, result.stdout[-2000:]
    assert "no check ran: nothing was verified" in result.stdout.splitlines()
    assert "Traceback" not in result.stdout + result.stderr


def test_a_pytest_run_that_verified_something_still_passes():
    result = _pytest([CPU_FILE, GPU_FILE])
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


def test_an_unknown_hypothesis_profile_in_the_environment_is_one_line_not_a_conftest_stack():
    result = _pytest([CPU_FILE], HYPOTHESIS_PROFILE="nope")
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1, result.stderr[-2000:]
    assert "HYPOTHESIS_PROFILE" in lines[0] and "'nope'" in lines[0] and "Traceback" not in result.stderr


def _gate(args, reports, **extra):
    return subprocess.run([sys.executable, "-m", "properties.tools.gate", "--reports", str(reports), *args],
                          cwd=REPO_ROOT, env=_env(**extra), capture_output=True, text=True, timeout=TIMEOUT_S)


@pytest.mark.parametrize("variable, value", [("VERIFY_REQUIRE_GPU", "yes"), ("VERIFY_REQUIRE_GPU", "true"),
                                             ("VERIFY_IMPL", "garbage"), ("VERIFY_IMPL", "ok=x.py:route bad=x.py")])
def test_a_malformed_gate_variable_is_refused_in_one_line_before_the_suite_runs(variable, value, tmp_path):
    reports = tmp_path / "reports"
    result = _gate(["--", "-n", "0", CPU_FILE], reports, **{variable: value})
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert variable in lines[0] and "Traceback" not in result.stderr and not reports.exists()


def test_verify_require_gpu_reads_1_as_required_and_0_or_unset_as_not():
    assert gate.switch_env({"VERIFY_REQUIRE_GPU": "1"}, gate.REQUIRE_GPU_ENV) is True
    assert gate.switch_env({"VERIFY_REQUIRE_GPU": "0"}, gate.REQUIRE_GPU_ENV) is False
    assert gate.switch_env({}, gate.REQUIRE_GPU_ENV) is False


def test_every_verify_variable_the_gate_reads_is_kept_from_the_tests():
    """Each VERIFY_* variable gate.py names is one of the switches conftest.py unsets for every test, so a gate
    a test runs never reads the outer run's (`VERIFY_REQUIRE_GPU=1 make verify` on a GPU runner)."""
    named = set(re.findall(r"\bVERIFY_[A-Z_]*[A-Z]\b", Path(gate.__file__).read_text()))
    assert named and named <= set(GATE_SWITCHES), sorted(named - set(GATE_SWITCHES))
    assert not set(GATE_SWITCHES) & set(os.environ)


def test_verify_impl_reaches_the_plugin_tests_as_options_and_no_test_environment(monkeypatch, tmp_path):
    """The gate hands VERIFY_IMPL's specs to pytest as --verify-impl (conftest.py passes them to the plug-in
    tests) and leaves the variable out of pytest's environment, so no other test's subprocess sees it."""
    spec = f"mine={tmp_path / 'mine.py'}:route"
    monkeypatch.setenv("VERIFY_IMPL", spec)
    seen = {}

    class Finished:
        def wait(self):
            return 0

    def popen(cmd, env, **kwargs):
        seen.update(cmd=cmd, env=env)
        return Finished()

    monkeypatch.setattr(gate.subprocess, "Popen", popen)
    args, _ = gate.parse([])
    assert args.plugins == [spec] and gate.pytest_plugin_options(args.plugins) == [f"--verify-impl={spec}"]
    gate.run_tests(tmp_path, "ci", 1, gate.pytest_plugin_options(args.plugins))
    assert "VERIFY_IMPL" not in seen["env"] and f"--verify-impl={spec}" in seen["cmd"]


def test_the_gate_names_a_missing_test_file_in_its_fail_reason(tmp_path):
    missing = "tests/test_nope_cpu.py"
    result = _gate(["--", "-n", "0", missing], tmp_path / "r", PATH=_no_nvcc_path())
    fails = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith("FAIL:")]
    assert result.returncode == 1 and any(missing in line for line in fails), result.stdout[-3000:]
    assert gate.missing_paths(["-k", "x", CPU_FILE, f"{missing}::t", "-p", "no:cacheprovider"]) == [missing]


def _no_nvcc_path():
    return os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                           if not os.path.exists(os.path.join(p, "nvcc")))


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_make_verify_writes_no_report_after_the_gate_refuses(tmp_path):
    """`HYPOTHESIS_PROFILE=nope make verify`: the gate refuses (exit 2) and make does not then write the report
    page (REPORT_ARGS sends it to a scratch file here). STAMP= keeps make from touching the venv."""
    page = tmp_path / "index.html"
    result = subprocess.run(["make", "--no-print-directory", "-s", "verify", "STAMP=", f"PY={sys.executable}",
                             f"REPORT_ARGS=--out {page}", f"GATE_ARGS=--reports {tmp_path / 'reports'}"],
                            cwd=REPO_ROOT, env=_env(HYPOTHESIS_PROFILE="nope"), capture_output=True, text=True,
                            timeout=TIMEOUT_S)
    assert result.returncode != 0 and "unknown Hypothesis profile 'nope'" in result.stderr, result.stderr[-2000:]
    assert not page.exists() and not (tmp_path / "reports").exists()


def test_the_cases_column_counts_the_cases_the_corpus_replay_compared(tmp_path):
    """The gate's per-part "cases": every regression case of a generator replayed is one case compared (the
    harness's comparison counts them, conftest.py reports them per test)."""
    report = tmp_path / "tests.json"
    result = _pytest([f"--gate-report={report}", "tests/test_corpus_cpu.py", "-k",
                      "test_every_recorded_output_equals_the_model and all_equal"])
    assert result.returncode == 0, result.stdout[-2000:]
    groups = json.loads(report.read_text())["groups"]
    replayed = sorted((REPO_ROOT / "corpora" / "regression").glob("all_equal-*.json"))
    assert replayed and groups["corpus replay"]["passed"] == 1
    assert groups["corpus replay"]["cases"] == len(replayed)


def test_a_comparison_counts_one_case_when_it_compared_an_output():
    from properties.engine import compare
    from properties.engine.cases import Outputs

    ids, weights = np.zeros((1, 8), np.int32), np.zeros((1, 8), np.float32)
    before = compare.compared_cases()
    compare.disagreements({"model": Outputs(ids, weights, None), "cute": Outputs(ids, weights, None)})
    compare.disagreements({"model": Outputs(ids, weights, None)})  # the reference alone: nothing compared
    assert compare.compared_cases() - before == 1
