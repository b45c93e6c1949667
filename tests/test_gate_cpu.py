"""`make verify`'s gate is never fooled by its own inputs: bad options exit 2 before anything is written,
reports are whole and never a previous run's, skips without a named reason fail, a selection that ran no
test fails, a missing nvcc or oracle is reported as not run (a failure under VERIFY_REQUIRE_GPU=1, as is no
GPU or no GPU check passed), and verify.json says where it ran."""

import json
import os
import subprocess
import sys

import pytest

from oracles.flashinfer_routing import build as flashinfer_build
from common.provenance import REPO_ROOT
from properties.engine import implementations
from properties.engine.interface import Declaration, Implementation
from properties.tools import gate, profiles

GATE_TIMEOUT_S = 300
# A small file of GPU checks: on a CPU each is a named GPU skip. A small file of CPU checks.
GPU_FILE = "tests/test_bench_gpu.py"
CPU_FILE = "tests/test_layers_cpu.py"


# The outer run's gate settings (make verify on a GPU runner sets VERIFY_REQUIRE_GPU=1) must not reach the
# gate under test: only each test's own arguments and env decide it.
GATE_SETTINGS = ("VERIFY_REQUIRE_GPU", "HYPOTHESIS_PROFILE", "PYTEST_ARGS")


def _gate(args, reports, env=None):
    inherited = {k: v for k, v in os.environ.items() if k not in GATE_SETTINGS}
    return subprocess.run([sys.executable, "-m", "properties.tools.gate", "--reports", str(reports), *args],
                          capture_output=True, text=True, cwd=gate.ROOT, timeout=GATE_TIMEOUT_S,
                          env={**inherited, **(env or {})})


@pytest.mark.parametrize("args, message", [
    (["--profile", "bogus"], "unknown Hypothesis profile 'bogus'"),
    (["--nosuch"], "unrecognized arguments: --nosuch"),
    (["--profile", "ci", "--", "--hypothesis-seed=5"], "--hypothesis-seed changes nothing"),
])
def test_bad_options_give_one_line_and_exit_2_before_anything_is_written(args, message, tmp_path):
    reports = tmp_path / "reports"
    result = _gate(args, reports)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [result.stderr.strip()] and message in result.stderr
    assert not reports.exists()


def no_gpu_env():
    """No CUDA device and no nvcc (the FlashInfer build is then "not run" at once)."""
    return {"CUDA_VISIBLE_DEVICES": "", "PATH": os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                                                if not os.path.exists(os.path.join(p, "nvcc")))}


def _summary(**overrides):
    base = {"groups": {"g": {"passed": 1, "failed": 0, "skipped": 0, "cases": 0, "seconds": 0.0,
                             "skip_reasons": {}, "failures": []}},
            "ran": 1, "gpu_checks_not_run": 0, "gpu_checks_passed": 1, "named_skips": {}, "unnamed_skips": []}
    return {**base, **overrides}


_BUILT = {"ran": True, "failed": False, "why": "", "seconds": 1.0}


def test_verdict_fails_on_gpu_gaps_only_when_required_and_on_a_missing_report():
    assert gate.verdict(0, _summary(), _BUILT, {}, require_gpu=True) == []
    gaps = _summary(gpu_checks_not_run=3)
    assert gate.verdict(0, gaps, _BUILT, {"triton": "ImportError: x"}, require_gpu=False) == []
    reasons = gate.verdict(0, gaps, _BUILT, {"triton": "ImportError: x"}, require_gpu=True)
    assert len(reasons) == 2 and "triton" in reasons[1]
    assert "wrote no report" in gate.verdict(3, None, _BUILT, {}, require_gpu=False)[0]


def test_require_gpu_fails_without_a_gpu_or_without_a_passed_gpu_check():
    no_gpu = gate.verdict(0, _summary(), _BUILT, {}, require_gpu=True, gpu_reason="no CUDA device on this machine")
    assert no_gpu == ["no GPU found (VERIFY_REQUIRE_GPU=1): no CUDA device on this machine"]
    assert gate.verdict(0, _summary(gpu_checks_passed=0), _BUILT, {}, require_gpu=True) == [
        "0 GPU checks passed (VERIFY_REQUIRE_GPU=1): no GPU test ran"]
    assert gate.verdict(0, _summary(gpu_checks_passed=0), _BUILT, {}, require_gpu=False) == []


NOTHING_RAN = "the selection ran no test"


@pytest.mark.parametrize("rc, summary", [
    (4, None),  # a usage error: no such file
    (5, None),  # nothing collected, no report
    (5, _summary(ran=0, groups={})),  # nothing collected
    (0, _summary(ran=0, groups={"g": {**_summary()["groups"]["g"], "passed": 0, "skipped": 3}})),  # all skipped
], ids=["usage-error", "nothing-collected-no-report", "nothing-collected", "all-skipped"])
def test_a_selection_that_ran_no_test_fails_and_says_so_last(rc, summary):
    reasons = gate.verdict(rc, summary, _BUILT, {}, require_gpu=False)
    assert reasons and reasons[-1].startswith(NOTHING_RAN) and f"pytest exit {rc}" in reasons[-1]


def test_a_failed_test_or_an_unnamed_skip_fails_the_verdict_whatever_pytest_returned():
    assert gate.verdict(0, _summary(), _BUILT, {}, require_gpu=False) == []
    failed = _summary(groups={"g": {**_summary()["groups"]["g"], "failed": 1}})
    assert gate.verdict(0, failed, _BUILT, {}, require_gpu=False) == ["1 tests failed"]
    unnamed = _summary(unnamed_skips=[{"test": "tests/test_x.py::t", "reason": "cc missing"}])
    assert gate.verdict(0, unnamed, _BUILT, {}, require_gpu=False) == [
        "1 tests skipped without a named reason: tests/test_x.py::t"]


def test_only_gpu_and_build_skips_are_named():
    assert gate.named_skip(f"{gate.GPU_NOT_RUN}: no CUDA device") == gate.GPU_NOT_RUN
    assert gate.named_skip(f"{flashinfer_build.NOT_RUN}: nvcc not on PATH") == flashinfer_build.NOT_RUN
    for reason in ("cc not found", "GPU check not run", "gpu check not run: x", "FlashInfer build not run"):
        assert gate.named_skip(reason) is None


def test_missing_nvcc_is_not_run_and_fails_only_under_require_gpu_without_a_library(monkeypatch, tmp_path):
    monkeypatch.setattr(flashinfer_build.shutil, "which", lambda name: None)
    monkeypatch.setattr(flashinfer_build, "LIBRARY", tmp_path / "absent.so")
    part = gate.build_flashinfer(require_gpu=False)
    assert part["why"].startswith("not run: nvcc not on PATH") and not part["ran"] and not part["failed"]
    assert gate.build_flashinfer(require_gpu=True)["failed"]
    prebuilt = tmp_path / "lib.so"
    prebuilt.write_bytes(b"")
    monkeypatch.setattr(flashinfer_build, "LIBRARY", prebuilt)
    part = gate.build_flashinfer(require_gpu=True)
    assert not part["failed"] and "prebuilt library is used" in part["why"]


def test_an_oracle_that_fails_to_import_on_a_gpu_is_listed_not_run(monkeypatch):
    monkeypatch.setattr(implementations, "cuda_reason", lambda: None)
    broken = Implementation("triton", None, Declaration(unavailable="ImportError: no module named triton"))
    monkeypatch.setitem(implementations.REGISTRY, "triton", broken)
    for name in ("cute", "flashinfer"):
        monkeypatch.setitem(implementations.REGISTRY, name, Implementation(name, None))
    assert implementations.failed_on_gpu() == {"triton": "ImportError: no module named triton"}
    assert "oracle triton" in gate.table(_summary(), _BUILT, implementations.failed_on_gpu())


def test_reports_are_this_runs_and_whole(monkeypatch, tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "tests.json").write_text(json.dumps(_summary()))
    (reports / "verify.json").write_text('{"verdict": "PASS"}')
    monkeypatch.setattr(gate, "run_tests", lambda *args, meanwhile: meanwhile() or (3, None))
    monkeypatch.setattr(gate, "build_flashinfer", lambda require_gpu: _BUILT)
    assert gate.main(["--reports", str(reports)]) == 1
    record = json.loads((reports / "verify.json").read_text())
    assert record["verdict"] == "FAIL" and "wrote no report" in record["reasons"][0]
    assert not (reports / "tests.json").exists() and sorted(p.name for p in reports.iterdir()) == ["verify.json"]
    env = record["environment"]
    assert env["commit"] and env["date"] and env["host"]["cpu"] and "gpu" in env and env["packages"]["numpy"]


def test_gate_end_to_end_counts_named_gpu_skips_and_require_gpu_fails_on_them(tmp_path):
    env = no_gpu_env()
    result = _gate(["--", "-n", "0", CPU_FILE, GPU_FILE], tmp_path / "a", env)
    record = json.loads((tmp_path / "a" / "verify.json").read_text())
    assert result.returncode == 0 and record["verdict"] == "PASS", result.stdout + result.stderr
    assert record["tests"]["gpu_checks_not_run"] >= 1 and record["tests"]["unnamed_skips"] == []
    assert record["flashinfer_build"]["why"].startswith("not run: nvcc not on PATH")
    required = _gate(["--require-gpu", "--", "-n", "0", CPU_FILE, GPU_FILE], tmp_path / "b", env)
    assert required.returncode == 1 and "GPU checks did not run" in required.stdout
    assert required.stdout.splitlines()[-1] == "verify: FAIL"


def test_require_gpu_on_a_cpu_fails_even_when_every_selected_test_passed(tmp_path):
    result = _gate(["--", "-n", "0", CPU_FILE], tmp_path / "r", {**no_gpu_env(), "VERIFY_REQUIRE_GPU": "1"})
    record = json.loads((tmp_path / "r" / "verify.json").read_text())
    assert result.returncode == 1 and record["verdict"] == "FAIL", result.stdout + result.stderr
    assert record["tests"]["ran"] >= 1 and record["tests"]["gpu_checks_passed"] == 0
    fails = [line for line in result.stdout.splitlines() if line.strip().startswith("FAIL:")]
    assert any("no GPU found" in line for line in fails) and any("0 GPU checks passed" in line for line in fails)
    assert result.stdout.splitlines()[-1] == "verify: FAIL"


@pytest.mark.parametrize("selection", [["tests/test_no_such_file.py"], [CPU_FILE, "-k", "no_test_has_this_name"]],
                         ids=["no-such-file", "all-deselected"])
def test_a_gate_whose_selection_ran_no_test_fails_and_does_not_say_every_check_ran(selection, tmp_path):
    result = _gate(["--", "-n", "0", *selection], tmp_path / "r", no_gpu_env())
    fails = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith("FAIL:")]
    assert result.returncode == 1 and fails[-1].startswith(f"FAIL: {NOTHING_RAN}"), result.stdout + result.stderr
    assert "every check selected in this run ran" not in result.stdout
    assert result.stdout.splitlines()[-1] == "verify: FAIL"


def test_reports_naming_a_file_gives_one_line_and_exit_2(tmp_path):
    existing = tmp_path / "verify.json"
    existing.write_text("kept")
    result = _gate(["--reports", str(existing)], tmp_path / "unused")
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"gate: error: argument --reports: is a file, not a folder: {existing}"]
    assert existing.read_text() == "kept" and not (tmp_path / "unused").exists()


def test_a_module_skipped_at_collection_is_counted_as_a_skip(tmp_path):
    """A test file that skips itself while being collected shows in the gate report as an unnamed skip (which
    fails the verdict), not as nothing: the project's conftest loaded as a plugin into a run of that file."""
    test_file = tmp_path / "test_skips_itself.py"
    test_file.write_text("import pytest\npytest.skip('no reason given', allow_module_level=True)\n")
    report = tmp_path / "gate.json"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "CUDA_VISIBLE_DEVICES": ""}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest",
                    "--rootdir", str(tmp_path), "--gate-report", str(report), str(test_file)],
                   cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    summary = json.loads(report.read_text())
    assert [s["reason"] for s in summary["unnamed_skips"]] == ["no reason given"]


def test_the_default_gpu_profile_draws_fresh_seeds_and_no_fewer_examples_than_ci(monkeypatch):
    examples, derandomized = profiles.PROFILES[profiles.GATE_GPU]
    assert examples >= profiles.PROFILES["ci"][0] and not derandomized
    monkeypatch.setattr(gate, "cuda_reason", lambda: None)
    assert gate.parse([])[0].profile == profiles.GATE_GPU
    monkeypatch.setattr(gate, "cuda_reason", lambda: "no CUDA device on this machine")
    assert gate.parse([])[0].profile == profiles.GATE_CPU == "ci"


def test_the_long_tests_are_collected_first_and_the_workers_steal_work(monkeypatch, tmp_path):
    """The gate's wall time is its slowest worker's: a long test (the benchmark, minutes on a GPU) starts at once,
    and idle workers take the tests queued behind it."""
    listed = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                             CPU_FILE, "tests/test_bench_gpu.py"], capture_output=True, text=True, cwd=gate.ROOT,
                            timeout=GATE_TIMEOUT_S)
    ids = [line for line in listed.stdout.splitlines() if "::" in line]
    assert len(ids) > 2 and ids[0].startswith("tests/test_bench_gpu.py::"), ids[:3]
    assert all(i.startswith(CPU_FILE) for i in ids[1:]), ids
    commands = []
    monkeypatch.setattr(gate.subprocess, "Popen", lambda cmd, **kwargs: commands.append(cmd) or _Finished())
    assert gate.run_tests(tmp_path, "ci", 4, ["-x"]) == (0, None)
    assert commands[0][-3:] == ["--dist", "worksteal", "-x"], commands


def test_each_worker_gets_one_thread_per_pool_unless_the_caller_sized_the_pools(monkeypatch, tmp_path):
    envs = []
    monkeypatch.setattr(gate.subprocess, "Popen", lambda cmd, **kwargs: envs.append(kwargs["env"]) or _Finished())
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "3")
    gate.run_tests(tmp_path, "ci", 4, [])
    assert envs[0]["OMP_NUM_THREADS"] == "1" and envs[0]["MKL_NUM_THREADS"] == "3", envs


def test_the_checks_run_while_the_tests_start_and_can_restart_them_with_other_arguments(monkeypatch, tmp_path):
    """The gate's own checks (oracle probes, MUFU tables, the evidence record) take seconds: they run while the workers
    start, and tables that differ stop the suite and start it again without its GPU tier."""
    commands, stopped = [], []
    monkeypatch.setattr(gate.subprocess, "Popen", lambda cmd, **kwargs: commands.append(cmd) or _Finished())
    monkeypatch.setattr(gate, "stop", stopped.append)
    assert gate.run_tests(tmp_path, "ci", 4, ["-x"], meanwhile=lambda: None) == (0, None)
    assert len(commands) == 1 and not stopped
    assert gate.run_tests(tmp_path, "ci", 4, ["-x"], meanwhile=lambda: ["-m", "not gpu"]) == (0, None)
    assert commands[1][-1] == "-x" and commands[2][-2:] == ["-m", "not gpu"] and len(stopped) == 1


class _Finished:
    """A pytest process that has already exited 0."""

    def wait(self):
        return 0
