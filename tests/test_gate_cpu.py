"""`make verify`'s gate is never fooled by its own inputs: bad options exit 2 before anything is written,
reports are whole and never a previous run's, skips without a named reason fail, a missing nvcc or oracle
is reported as not run (a failure under VERIFY_REQUIRE_GPU=1), and verify.json says where it ran."""

import json
import os
import subprocess
import sys

import pytest

from oracles.flashinfer_routing import build as flashinfer_build
from oracles.provenance import REPO_ROOT
from properties.engine import implementations
from properties.engine.interface import Declaration, Implementation
from properties.tools import gate

GATE_TIMEOUT_S = 300
# A small file of GPU checks: on a CPU each is a named GPU skip.
GPU_FILE = "tests/test_bench_gpu.py"


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


def _summary(**overrides):
    base = {"groups": {"g": {"passed": 1, "failed": 0, "skipped": 0, "cases": 0, "seconds": 0.0,
                             "skip_reasons": {}, "failures": []}},
            "gpu_checks_not_run": 0, "named_skips": {}, "unnamed_skips": []}
    return {**base, **overrides}


_BUILT = {"ran": True, "failed": False, "why": "", "seconds": 1.0}


def test_verdict_fails_on_gpu_gaps_only_when_required_and_on_a_missing_report():
    assert gate.verdict(0, _summary(), _BUILT, {}, require_gpu=True) == []
    gaps = _summary(gpu_checks_not_run=3)
    assert gate.verdict(0, gaps, _BUILT, {"triton": "ImportError: x"}, require_gpu=False) == []
    reasons = gate.verdict(0, gaps, _BUILT, {"triton": "ImportError: x"}, require_gpu=True)
    assert len(reasons) == 2 and "triton" in reasons[1]
    assert "wrote no report" in gate.verdict(4, None, _BUILT, {}, require_gpu=False)[0]


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
    monkeypatch.setattr(gate, "run_tests", lambda *args: (3, None))
    monkeypatch.setattr(gate, "build_flashinfer", lambda require_gpu: _BUILT)
    assert gate.main(["--reports", str(reports)]) == 1
    record = json.loads((reports / "verify.json").read_text())
    assert record["verdict"] == "FAIL" and "wrote no report" in record["reasons"][0]
    assert not (reports / "tests.json").exists() and sorted(p.name for p in reports.iterdir()) == ["verify.json"]
    env = record["environment"]
    assert env["commit"] and env["date"] and env["host"]["cpu"] and "gpu" in env and env["packages"]["numpy"]


def test_gate_end_to_end_counts_named_gpu_skips_and_require_gpu_fails_on_them(tmp_path):
    env = {"CUDA_VISIBLE_DEVICES": "", "PATH": os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                   if not os.path.exists(os.path.join(p, "nvcc")))}
    result = _gate(["--", "-n", "0", GPU_FILE], tmp_path / "a", env)
    record = json.loads((tmp_path / "a" / "verify.json").read_text())
    assert result.returncode == 0 and record["verdict"] == "PASS", result.stdout + result.stderr
    assert record["tests"]["gpu_checks_not_run"] >= 1 and record["tests"]["unnamed_skips"] == []
    assert record["flashinfer_build"]["why"].startswith("not run: nvcc not on PATH")
    required = _gate(["--require-gpu", "--", "-n", "0", GPU_FILE], tmp_path / "b", env)
    assert required.returncode == 1 and "GPU checks did not run" in required.stdout
    assert required.stdout.splitlines()[-1] == "verify: FAIL"


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
