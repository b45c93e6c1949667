"""SIGINT and SIGTERM end every long command line within seconds, with one line and exit 130 or 143, never a
KeyboardInterrupt traceback (common/interrupts.py; the soak: tests/test_soak_interrupt_cpu.py, the gate:
tests/test_gate_progress_cpu.py)."""

import ast
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from common import interrupts
from common.provenance import REPO_ROOT

# The long commands other than the soak and the gate (which keep a summary of their own): each runs its main
# through interrupts.run when started as python -m.
LONG_COMMANDS = {
    "properties/replay.py": "python -m properties.replay",
    "properties/view.py": "view",
    "properties/report/__main__.py": "report",
    "properties/bench/cli.py": "python -m properties.bench",
    "properties/bench/breakdown.py": "python -m properties.bench.breakdown",
    "properties/bench/variants.py": "python -m properties.bench.variants",
    "properties/corpus.py": "python -m properties.corpus",
    "properties/tools/smoke.py": "python -m properties.tools.smoke",
    "oracles/mufu/__main__.py": "python -m oracles.mufu",
    "properties/mutants/__main__.py": "python -m properties.mutants",
    "properties/mutants/harness_run.py": "python -m properties.mutants.harness_run",
}
END_WITHIN_S = 20
STARTED_WITHIN_S = 120  # the imports (torch, the model) on a loaded machine


@pytest.mark.parametrize("sig", (signal.SIGINT, signal.SIGTERM), ids=("SIGINT", "SIGTERM"))
def test_a_signal_ends_main_with_one_line_and_128_plus_its_number(sig, capsys):
    def main(argv):
        os.kill(os.getpid(), sig)
        time.sleep(END_WITHIN_S)  # never reached: the handler raises first
        return 0

    assert interrupts.run("python -m example", main) == 128 + sig
    err = capsys.readouterr().err.splitlines()
    assert err == [f"python -m example: INTERRUPTED by {signal.Signals(sig).name} (exit {128 + sig})"]


def test_the_handlers_before_are_restored():
    before = signal.getsignal(signal.SIGINT)
    assert interrupts.run("example", lambda argv: 0) == 0 and signal.getsignal(signal.SIGINT) is before


def test_work_queued_when_a_signal_arrives_never_starts_though_the_running_work_ends_first(monkeypatch):
    """The signal ends the running work's children before the pool is left: a thread freed by that must not start
    the next queued work (on the H200 host under load, the command's third child started)."""
    release, ran = threading.Event(), []

    def running_work_ends():  # the running work's child ended; its thread is free before the pool is left
        release.set()
        time.sleep(0.5)

    monkeypatch.setattr(interrupts, "end_children", running_work_ends)

    def main(argv):
        with interrupts.ThreadPool(1) as pool:
            pool.submit(release.wait)
            pool.submit(ran.append, "queued work")
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(END_WITHIN_S)  # never reached: the handler raises first
        return 0

    assert interrupts.run("example", main) == 130 and ran == []
    with interrupts.ThreadPool(1) as pool:  # the next command's pool starts its work
        assert pool.submit(lambda: "ran").result() == "ran"


@pytest.mark.parametrize("path", sorted(LONG_COMMANDS))
def test_every_long_command_runs_its_main_through_interrupts(path):
    tree = ast.parse((REPO_ROOT / path).read_text())
    guard = [node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)]
    assert len(guard) == 2 and ast.unparse(guard[-1].body[0]) == (
        f"sys.exit(interrupts.run({LONG_COMMANDS[path]!r}, main))"), path
    # and before any other import, SIGINT while the imports load is one line too (common/interrupts.at_start)
    first_import = next(i for i, node in enumerate(tree.body) if isinstance(node, (ast.Import, ast.ImportFrom)))
    assert tree.body.index(guard[0]) < first_import, path
    assert ast.unparse(guard[0].body[-1]) == f"at_start({LONG_COMMANDS[path]!r})", path


def test_ctrl_c_ends_the_corpus_generation_with_one_line(tmp_path):
    """A real long command on the CPU: drawing a large corpus into a scratch folder, SIGINT once it is drawing (a
    fixed wait sent it, on a loaded GPU host, while torch was still importing, before any handler can exist)."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "properties.corpus", "generate", "--folder", str(tmp_path / "c"),
                             "--per-generator", "1000"], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + STARTED_WITHIN_S  # in its loop once it has written a case (imports done)
    while proc.poll() is None and not any((tmp_path / "c").glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None and any((tmp_path / "c").glob("*.json")), proc.communicate()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=END_WITHIN_S)
    assert proc.returncode == 130 and "Traceback" not in out + err, err[-2000:]
    assert err.strip().splitlines() == ["python -m properties.corpus: INTERRUPTED by SIGINT (exit 130)"]


CHILD_WAITER = """
import subprocess, sys
from common import interrupts

def main(argv):
    with interrupts.ThreadPool(2) as pool:  # as the mutant runners wait on their probes: 2 running, 4 queued
        sleep = "import pathlib, sys, time; pathlib.Path(sys.argv[1]).touch(); time.sleep(600)"
        futures = [pool.submit(subprocess.call, [sys.executable, "-c", sleep, f"{argv[0]}/{i}"]) for i in range(6)]
        print("started", flush=True)
        return sum(f.result() for f in futures)

sys.exit(interrupts.run("waiter", main, sys.argv[1:]))
"""


@pytest.mark.parametrize("sig", (signal.SIGINT, signal.SIGTERM), ids=("SIGINT", "SIGTERM"))
def test_a_command_waiting_on_child_processes_ends_them_and_itself_in_seconds(sig, tmp_path):
    """A signal to the command alone (not its process group): the work running in its children ends with it, the
    work queued never starts, and it ends in one line."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD_WAITER, str(tmp_path)], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert proc.stdout.readline().strip() == "started"
    deadline = time.monotonic() + STARTED_WITHIN_S
    while len(list(tmp_path.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    sleepers = interrupts.children(proc.pid)
    assert len(sleepers) == 2
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=END_WITHIN_S)
    assert proc.returncode == 128 + sig and err.strip().splitlines() == [
        f"waiter: INTERRUPTED by {signal.Signals(sig).name} (exit {128 + sig})"], err
    time.sleep(0.5)
    assert len(list(tmp_path.iterdir())) == 2, "queued work started after the signal"
    assert not [pid for pid in sleepers if Path(f"/proc/{pid}").exists()
                and "Z" not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]]
