"""Replay's verdict for an implementation that cannot run here (a GPU plug-in on a CPU, a plug-in whose module
is missing) is its own: ``replay: NOT RUN (exit 4)``, after every file was read, never ``UNREADABLE (exit 2)``,
which is for a file that cannot be read."""

import os
import subprocess
import sys

import pytest

from common.provenance import REPO_ROOT
from properties import replay

CASE = REPO_ROOT / "corpora" / "regression" / "all_equal-000.json"
FI_FUSED = f"fi_fused={REPO_ROOT / 'examples' / 'plugins' / 'fi_fused.py'}:route"


@pytest.mark.parametrize("spec, reason", [
    (FI_FUSED, "implementation fi_fused not run: "),
    ("gone=no_such_module_anywhere:route", "implementation gone not run: importing no_such_module_anywhere raised"),
    ("gone=/nonexistent/plugin.py:route", "implementation gone not run: no file /nonexistent/plugin.py"),
], ids=["gpu-plugin-on-a-cpu", "missing-module", "missing-file"])
def test_an_implementation_that_cannot_run_is_not_run_not_unreadable(spec, reason):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-m", "properties.replay", str(CASE), "--impl", spec], cwd=REPO_ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == replay.NOT_RUN == 4, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and reason in done.stderr, done.stderr
    assert done.stdout.splitlines()[-1] == "replay: NOT RUN (exit 4)" and "UNREADABLE" not in done.stdout
