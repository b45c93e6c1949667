"""The gate's verdict and summary (properties/tools/gate.py) on hand-made test reports, the test run itself
replaced: a failed test, or a GPU check not run under --require-gpu, fails the gate; a clean report passes."""

import json

import pytest

from properties.tools import gate


def _group(passed=3, failed=0, skipped=0, reasons=None):
    return {"passed": passed, "failed": failed, "skipped": skipped, "cases": 7, "seconds": 1.0,
            "skip_reasons": reasons or {}, "failures": []}


@pytest.fixture
def fake_run(monkeypatch, tmp_path):
    """``run(groups, not_run, rc, *argv)``: the gate on a test run that wrote ``groups``; (exit, verify.json)."""
    monkeypatch.setattr(gate, "cuda_reason", lambda: "no CUDA device")

    def run(groups, not_run=0, rc=0, *argv):
        def tests(reports, profile, workers):
            (reports / "tests.json").write_text(json.dumps({"groups": groups, "gpu_checks_not_run": not_run}))
            return rc, 1.0

        monkeypatch.setattr(gate, "_run_tests", tests)
        code = gate.main(["--reports", str(tmp_path), *argv])
        return code, json.loads((tmp_path / "verify.json").read_text())

    return run


def test_a_clean_report_passes(fake_run, capsys):
    code, record = fake_run({"numpy model": _group()})
    assert code == 0 and record["verdict"] == "PASS"
    assert "verify: PASS" in capsys.readouterr().out


def test_a_failed_test_fails_the_gate_whatever_pytest_returned(fake_run):
    code, record = fake_run({"numpy model": _group(), "corpus replay": _group(failed=1)}, 0, 0)
    assert code == 1 and record["verdict"] == "FAIL"


def test_a_gpu_check_not_run_fails_only_under_require_gpu(fake_run, capsys):
    groups = {"cute kernel": _group(passed=0, skipped=2, reasons={"GPU check not run: no CUDA device": 2})}
    code, record = fake_run(groups, 2, 0)
    assert code == 0 and record["gpu_checks_not_run"] == 2
    assert "2 x GPU check not run: no CUDA device" in capsys.readouterr().out
    code, record = fake_run(groups, 2, 0, "--require-gpu")
    assert code == 1 and record["verdict"] == "FAIL"
