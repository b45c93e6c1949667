"""No command writes a tracked file unless its command line says so (issue 20, item 4): the default forms of the
make targets and command lines that run on a CPU in seconds, run in a fresh repository made of this tree's
files, leave `git status --porcelain` empty; the defaults of the commands too costly to run here (the bench's
timing of `make verify`, its GPU run) point under reports/."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from common.provenance import REPO_ROOT

TIMEOUT_S = 300
# Not part of the tree: git's own folder, the environment, build outputs and reports (all ignored).
NOT_COPIED = (".git", ".venv", "build", "reports", "__pycache__", ".hypothesis", ".pytest_cache", "*.egg-info")
CASE = "corpora/regression/all_equal-000.json"
CHEAP_HARNESS_MUTANT = "fpenv_daz_disabled"  # its intended test imports NumPy only
# Each default form, as a user types it (make is told the venv exists and not to build the FlashInfer oracle:
# both are set-up, not the command under test).
COMMANDS = (
    ["make", "replay", f"CASE={CASE}"],
    ["make", "soak", "SOAK_ARGS=--rows 64 --b 2 --problems 16 --fault ties_to_highest_index --no-progress"],
    ["make", "harness-mutants", f"HARNESS_MUTANTS_ARGS=--only {CHEAP_HARNESS_MUTANT}"],
    ["make", "bench"],
    ["python", "-m", "properties.replay", "corpora/examples"],
    ["python", "-m", "properties.soak", "--rows", "32", "--b", "1", "--problems", "8", "--impl", "model",
     "--no-progress"],
    ["python", "-m", "properties.corpus", "generate"],
)


def _git(folder, *args):
    return subprocess.run(["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", *args],
                          cwd=folder, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A repository of this tree's files, every one committed (the tree may be a copy without .git: a harness
    mutant's)."""
    folder = tmp_path_factory.mktemp("clean-tree") / "repo"
    shutil.copytree(REPO_ROOT, folder, ignore=shutil.ignore_patterns(*NOT_COPIED))
    _git(folder, "init", "-q")
    _git(folder, "add", "-A")
    _git(folder, "commit", "-q", "-m", "the tree under test")
    assert _git(folder, "status", "--porcelain") == ""
    return folder


def _run(command, folder):
    python = sys.executable
    if command[0] == "make":
        command = ["make", "-s", "-o", ".venv/.installed", "-o", "flashinfer-oracle", f"PY={python}", *command[1:]]
    else:
        command = [python, *command[1:]]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(folder), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)


def test_default_forms_leave_git_status_clean(clone):
    ran = {" ".join(command): _run(command, clone) for command in COMMANDS}
    status = _git(clone, "status", "--porcelain", "--untracked-files=all")
    assert status == "", "commands wrote into the tree:\n" + status + "".join(
        f"\n$ {name}: exit {r.returncode}\n{(r.stdout + r.stderr)[-600:]}" for name, r in ran.items())
    # Each ran its work (not a refusal): what it says it does, and its output under reports/.
    assert ran[f"make replay CASE={CASE}"].returncode == 0
    assert ran["python -m properties.replay corpora/examples"].returncode == 1  # the examples reproduce
    assert "soak: FAIL" in ran[" ".join(COMMANDS[1])].stdout  # the planted fault is caught
    assert "soak: PASS" in ran[" ".join(COMMANDS[5])].stdout
    assert "harness mutants: PASS (1 mutants" in ran[" ".join(COMMANDS[2])].stdout
    reports = clone / "reports"
    assert (reports / "soak.json").is_file() and any((reports / "soak-failures").glob("*.json"))
    assert (reports / "harness-mutants.json").is_file() and (reports / "harness-mutants.md").is_file()


def test_the_benchs_default_outputs_are_reports(monkeypatch):
    """The bench's run and its `make verify` timing (a GPU and the whole gate: not run here) write under
    reports/ unless --out names another file."""
    from properties.bench import cli

    reports = REPO_ROOT / "reports"
    assert Path(cli.parse_args([]).out).parent == reports
    assert Path(cli.parse_args(["--time-verify"]).out).parent == reports
    assert Path(cli.parse_args(["--out", "x.json"]).out) == Path("x.json")
