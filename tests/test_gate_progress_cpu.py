"""The gate tells the truth while it runs and when it is cut short: one counter, written by the controlling
pytest process alone, that only grows to the tests collected; each failure named the moment it is known;
on SIGTERM or SIGINT pytest ended and verify.json written with verdict INCOMPLETE, the failures so far and
the parts not finished, and a non-zero exit.

The suites run here are small temporary test files, loaded with the project's conftest as a plugin."""

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from properties.tools import gate, progress

from test_gate_cpu import GATE_SETTINGS, no_gpu_env

TIMEOUT_S = 300
NAMED_WITHIN_S = 120  # gate and pytest start-up on a busy 2-core machine, then a test that fails at once
SLEEPERS = 16
SLOW = """import time

def test_a_fails():
    assert 1 == 2

def test_b_sleeps():
    time.sleep(600)
"""
MANY = f"""import time
import pytest

@pytest.mark.parametrize("i", range({SLEEPERS}))
def test_sleeps(i):
    time.sleep(0.15)
"""


def _suite(folder, name, text):
    """``folder``/``name`` holding ``text``, and the pytest arguments that run it with the project's conftest."""
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    return ["-p", "conftest", "--rootdir", str(folder), str(folder / name)]


class _Config:
    """A stand-in pytest config: a worker's has ``workeroutput``."""


def test_only_the_controlling_process_writes_progress(tmp_path):
    worker = _Config()
    worker.workeroutput = {}
    assert progress.Writer.for_config(worker, tmp_path / "p") is None
    assert isinstance(progress.Writer.for_config(_Config(), tmp_path / "p"), progress.Writer)
    assert progress.Writer.for_config(_Config(), None) is None


def test_the_file_reads_back_counts_and_failures_and_ignores_a_cut_line(tmp_path):
    path = tmp_path / "p"
    writer = progress.Writer(path)
    writer.set_collected(3)
    assert writer.failed("t.py::a", "call") == "t.py::a" and writer.failed("t.py::b", "setup") == "t.py::b (setup)"
    writer.test_done()
    with open(path, "a") as f:
        f.write('{"done": 9')
    state = progress.read(path)
    assert state == {"done": 1, "collected": 3, "failures": ["t.py::a", "t.py::b (setup)"]}
    assert progress.describe(state) == "1 of 3 tests done"
    assert progress.describe(progress.read(tmp_path / "absent")) == "0 tests done"


def test_under_xdist_the_counter_only_grows_to_the_tests_collected(tmp_path):
    path = tmp_path / "progress.jsonl"
    args = _suite(tmp_path / "suite", "test_many.py", MANY)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                             "--gate-progress", str(path), *args], cwd=gate.ROOT, capture_output=True, text=True,
                            timeout=TIMEOUT_S, env={**os.environ, **no_gpu_env()})
    assert result.returncode == 0, result.stdout + result.stderr
    counts = [json.loads(line) for line in path.read_text().splitlines()]
    done = [c["done"] for c in counts]
    assert done == sorted(done) and done[-1] == SLEEPERS, done
    assert {c["collected"] for c in counts} == {SLEEPERS}


def _lines(stream, into):
    for line in stream:
        into.put(line.rstrip("\n"))
    into.put(None)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_gate_cut_short_names_its_failure_at_once_and_reports_incomplete(signum, tmp_path):
    reports = tmp_path / "reports"
    args = _suite(tmp_path / "suite", "test_slow.py", SLOW)
    env = {**{k: v for k, v in os.environ.items() if k not in GATE_SETTINGS}, **no_gpu_env()}
    proc = subprocess.Popen([sys.executable, "-m", "properties.tools.gate", "--reports", str(reports), "--",
                             "-n", "0", *args], cwd=gate.ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines, seen = queue.Queue(), []
    threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
    deadline = time.monotonic() + NAMED_WITHIN_S
    try:
        while "gate: FAILED test_slow.py::test_a_fails" not in seen:  # named while test_b still sleeps
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            assert line is not None, "the gate ended before naming the failure:\n" + "\n".join(seen)
            seen.append(line)
        proc.send_signal(signum)
        rc = proc.wait(timeout=TIMEOUT_S)
    finally:
        proc.kill()
    while (line := lines.get(timeout=TIMEOUT_S)) is not None:
        seen.append(line)
    record = json.loads((reports / "verify.json").read_text())
    assert rc == 128 + signum and seen[-1] == "verify: INCOMPLETE", "\n".join(seen)
    assert record["verdict"] == "INCOMPLETE" and record["failures_so_far"] == ["test_slow.py::test_a_fails"]
    assert record["not_finished"] == ["tests"] and signal.Signals(signum).name in record["reasons"][0]
    assert " of 2 tests done" in record["reasons"][0]  # 0 or 1: test_a may not have torn down yet
