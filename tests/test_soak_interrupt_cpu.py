"""Interrupting the soak loses nothing (the model alone on the CPU): SIGINT or SIGTERM ends it within seconds
with one line, exit 130 or 143, and a whole summary; after SIGKILL the last periodic summary on disk is whole
and --resume goes on from it; over interrupt, resume, kill and resume the chunks' batches follow each other
with no gap and no batch twice, and the rows add up. A signal while the soak starts ends it in one line too."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from common.provenance import REPO_ROOT

B, PROBLEMS = 2, 8
ROWS_PER_BATCH = B * PROBLEMS
CHECKPOINT_S = 0.5
END_WITHIN_S = 20  # the signal's effect: far below this on any machine (about a second here)


MODEL_ON_CPU = ("--device", "cpu", "--impl", "model")
START_S = 120  # the longest a soak may take to write its first summary here


def _start(summary, rows="1e9", under_test=MODEL_ON_CPU):
    """The soak of ``under_test`` (its --device and --impl) in a process of its own: --out, or --resume
    where the summary exists."""
    args = [sys.executable, "-m", "properties.soak", "--no-progress", *under_test, "--rows", rows, "--b", str(B),
            "--problems", str(PROBLEMS), "--checkpoint-seconds", str(CHECKPOINT_S),
            "--failures-dir", str(summary.parent / "failures")]
    args += ["--resume", str(summary)] if summary.exists() else ["--out", str(summary)]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **({"CUDA_VISIBLE_DEVICES": ""} if "cpu" in under_test else {})}
    return subprocess.Popen(args, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_checkpoint(summary, proc, beyond=0, start_s=START_S):
    """Wait until the soak's periodic summary on disk has verified batches past batch ``beyond``."""
    deadline = time.monotonic() + start_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if summary.exists() and json.loads(summary.read_text())["next_offset"] > beyond:  # replaced whole
            return
        time.sleep(0.1)
    raise AssertionError("no periodic summary written")


def _signal(proc, sig):
    proc.send_signal(sig)
    sent = time.monotonic()
    out, err = proc.communicate(timeout=END_WITHIN_S)
    return proc.returncode, out, err, time.monotonic() - sent


def _chunks_follow_each_other(summary):
    data = json.loads(summary.read_text())
    chunks = data["chunks"]
    assert chunks[0]["offset"] == 0
    for before, after in zip(chunks, chunks[1:]):
        assert after["offset"] == before["next_offset"], chunks  # no gap, no batch twice
    for chunk in chunks:
        assert chunk["rows"] == (chunk["next_offset"] - chunk["offset"]) * ROWS_PER_BATCH, chunk
    assert data["next_offset"] == chunks[-1]["next_offset"]
    assert data["tally"]["rows"] == sum(c["rows"] for c in chunks) == data["next_offset"] * ROWS_PER_BATCH
    assert data["tally"]["batches"] == data["next_offset"]
    return data


def signal_ends_the_soak(sig, summary, under_test=MODEL_ON_CPU, start_s=START_S):
    """The check of one signal: within seconds, one line, exit 128 + sig, a whole summary that says so."""
    proc = _start(summary, under_test=under_test)
    _wait_for_checkpoint(summary, proc, start_s=start_s)
    code, out, err, took = _signal(proc, sig)
    assert code == 128 + sig and took < END_WITHIN_S, (code, took, err[-2000:])
    assert "Traceback" not in out + err and "KeyboardInterrupt" not in err, err[-2000:]
    lines = out.strip().splitlines()
    # The soak's own lines (a library compiling on a GPU may print others): the one that says it was interrupted,
    # last, with no summary line or verdict table of a finished run.
    last = [line for line in lines if line.startswith(("soak", "{", "verdict"))]
    assert last == lines[-1:] and last[0].startswith(f"soak: INTERRUPTED by {signal.Signals(sig).name}: "), out
    data = _chunks_follow_each_other(summary)
    assert data["interrupted"] == signal.Signals(sig).name and not data["done"] and data["tally"]["rows"] > 0
    assert f"--resume {summary} goes on from batch {data['next_offset']}" in last[0]


@pytest.mark.parametrize("sig", (signal.SIGINT, signal.SIGTERM), ids=("SIGINT", "SIGTERM"))
def test_a_signal_ends_the_soak_in_seconds_with_one_line_and_a_whole_summary(sig, tmp_path):
    signal_ends_the_soak(sig, tmp_path / "s.json")


def interrupt_resume_kill_resume(summary, under_test=MODEL_ON_CPU, start_s=START_S):
    """SIGINT, --resume, SIGKILL, --resume to a target: three chunks, one after the other, every batch once."""
    first = _start(summary, under_test=under_test)
    _wait_for_checkpoint(summary, first, start_s=start_s)
    assert _signal(first, signal.SIGINT)[0] == 130
    interrupted = _chunks_follow_each_other(summary)

    second = _start(summary, under_test=under_test)  # --resume
    _wait_for_checkpoint(summary, second, beyond=interrupted["next_offset"], start_s=start_s)
    second.kill()
    second.communicate(timeout=END_WITHIN_S)
    killed = _chunks_follow_each_other(summary)  # the last periodic summary: whole
    assert len(killed["chunks"]) == 2 and killed["next_offset"] > interrupted["next_offset"]
    assert "interrupted" not in killed

    target = killed["tally"]["rows"] + 20 * ROWS_PER_BATCH
    third = _start(summary, str(target), under_test)
    out, err = third.communicate(timeout=start_s + 60)
    assert third.returncode == 0, out[-2000:] + err[-2000:]
    assert out.strip().splitlines()[-1].startswith("soak: PASS: ")
    done = _chunks_follow_each_other(summary)
    assert len(done["chunks"]) == 3 and done["done"] and done["tally"]["rows"] >= target
    assert done["chunks"][2]["offset"] == killed["next_offset"]


def test_interrupt_resume_kill_resume_verifies_every_batch_once(tmp_path):
    interrupt_resume_kill_resume(tmp_path / "s.json")


def test_a_signal_while_the_soak_starts_is_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    """The loop has not run a batch: the signal (raised here where the soak builds its run) ends it at once."""
    from properties.soak import __main__ as soak

    def signalled(*args):
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(soak, "run", signalled)
    summary = tmp_path / "s.json"
    code = soak.main(["--device", "cpu", "--no-progress", "--impl", "model", "--rows", "16", "--out",
                      str(summary)])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 143 and out == ["soak: INTERRUPTED by SIGTERM before any batch was verified: nothing written "
                                   "(exit 143)"]
    assert not summary.exists()
