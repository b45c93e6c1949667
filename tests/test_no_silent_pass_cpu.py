"""No silent pass: whatever a plug-in does is its outcome, never the command's exit; a resumed finished soak says
its stored verdict; a planted fault the options exclude is refused; every output path is checked before the
work; the gate checks HYPOTHESIS_PROFILE as `make verify` does; a Ctrl-C while a command starts is one line and
exit 130; a malformed record is one line naming the file and the field."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from common import args as types
from common import records
from common.provenance import REPO_ROOT
from properties import replay
from properties.engine import implementations
from properties.soak.__main__ import main as soak_main
from properties.tools import gate

CASE = REPO_ROOT / "corpora" / "regression" / "all_equal-000.json"
SOAK = ["--device", "cpu", "--no-progress", "--b", "2", "--problems", "8"]
SIGNATURE = ("logits, bias, ids, weights, scale, renormalize=True, metadata=None, local_expert_offset=0, "
             "num_local_experts=0, tile_n=0")
# What a plug-in's route does, after ``calls`` good calls (the model's outputs): each must be its outcome.
ENDINGS = {"exits": "sys.exit(0)", "raises_system_exit": "raise SystemExit(0)",
           "raises_keyboard_interrupt": "raise KeyboardInterrupt", "raises": "raise RuntimeError('boom')"}
RAISED = {"exits": "SystemExit", "raises_system_exit": "SystemExit",
          "raises_keyboard_interrupt": "KeyboardInterrupt", "raises": "RuntimeError"}



@pytest.fixture(autouse=True)
def _registry():
    """Each test leaves the registry as it found it: replay and the soak register the plug-ins --impl names."""
    before = dict(implementations.REGISTRY)
    yield
    implementations.REGISTRY.clear()
    implementations.REGISTRY.update(before)

def _plugin(tmp_path, ending, calls=0):
    """A plug-in that runs the NumPy model on its tensors, so it declares the CPU: undeclared ("auto") it would be
    handed CUDA tensors on a GPU machine, fail its probe on .numpy() and be refused before the run (exit 2, one
    line on stderr) instead of ending as ``ending`` says after ``calls`` good calls."""
    path = tmp_path / f"{ending}_{calls}.py"
    path.write_text(f"""import sys
import torch
import oracles.numpy_model as model
from properties.engine.interface import Declaration
done = [0]
def route({SIGNATURE}):
    done[0] += 1
    if done[0] > {calls}:
        {ENDINGS[ending]}
    i, w = model.route(logits.numpy(), bias.numpy(), scale, renormalize)
    ids.copy_(torch.from_numpy(i))
    weights.copy_(torch.from_numpy(w))
route.declaration = Declaration(device="cpu")
""")
    return f"mine_{ending}_{calls}={path}:route"


def _run(argv):
    try:
        return soak_main(argv)
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize("ending", ENDINGS)
def test_a_plugin_that_ends_on_a_replayed_case_is_not_run_exit_4(tmp_path, ending, capsys):
    """Its probe passes (one good call), then the case's call ends: replay says not run, exit 4."""
    from common.interrupts import Interrupts

    with Interrupts():  # as under python -m: a signal is Interrupted, so a bare KeyboardInterrupt is the plug-in's
        status = replay.main([str(CASE), "--impl", _plugin(tmp_path, ending, calls=1)])
    out, err = capsys.readouterr()
    assert status == replay.NOT_RUN and f"not run: raised {RAISED[ending]}" in err, err
    assert out.splitlines()[-1] == "replay: NOT RUN (exit 4)"


def test_a_plugin_that_exits_in_its_probe_is_refused_one_line(tmp_path, capsys):
    assert _run([*SOAK, "--rows", "16", "--impl", _plugin(tmp_path, "exits"), "--out", str(tmp_path / "s.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not run: raised SystemExit: 0" in err[0] and not (tmp_path / "s.json").exists()


def test_a_plugin_that_exits_mid_soak_fails_it_and_keeps_the_rows_verified(tmp_path, capsys):
    """A soak whose plug-in exits after some batches: exit 1, NOT RUN, the summary of the batches before kept."""
    summary = tmp_path / "s.json"
    status = _run([*SOAK, "--rows", "256", "--impl", _plugin(tmp_path, "exits", calls=40), "--out", str(summary),
                   "--failures-dir", str(tmp_path / "f")])
    out, err = capsys.readouterr()
    assert out.strip(), f"exit {status}, nothing on stdout; stderr: {err}"
    last = out.splitlines()[-1]
    written = json.loads(summary.read_text())
    assert status == 1 and last.startswith("soak: NOT RUN: implementation mine_exits_40 not run: raised SystemExit")
    assert written["not_run"] and 0 < written["tally"]["rows"] < 256 and not written["done"]


def _soak_with_a_fault(tmp_path, rows):
    return [*SOAK, "--fault", "ties_to_highest_index", "--families", "all_equal", "--rows", str(rows), "--resume",
            str(tmp_path / "r.json"), "--failures-dir", str(tmp_path / "f")]


def test_resuming_a_finished_soak_says_its_stored_verdict(tmp_path, capsys):
    assert _run(_soak_with_a_fault(tmp_path, 32)) == 1
    first = capsys.readouterr().out.splitlines()[-1]
    assert first.startswith("soak: FAIL: ")
    assert _run(_soak_with_a_fault(tmp_path, 32)) == 1
    assert capsys.readouterr().out.splitlines()[-1] == first


def test_a_resumed_run_ends_with_the_whole_runs_verdict(tmp_path, capsys):
    """Its first chunk disagreed; the resumed chunk alone may not: the verdict is the whole run's."""
    assert _run(_soak_with_a_fault(tmp_path, 16)) == 1
    capsys.readouterr()
    assert _run(_soak_with_a_fault(tmp_path, 32)) == 1
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("soak: FAIL: ") and " in 32 rows " in last, last


@pytest.mark.parametrize("options,option", [(["--fault", "writes_the_guard", "--metadata", "off"], "--metadata"),
                                            (["--fault", "ties_to_highest_index", "--families", "plain"], "--families")])
def test_a_planted_fault_that_cannot_show_is_refused_naming_the_option(tmp_path, options, option, capsys):
    assert _run([*SOAK, "--rows", "16", *options, "--out", str(tmp_path / "s.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and option in err[0] and "cannot show" in err[0] and not (tmp_path / "s.json").exists()


def test_the_output_check_refuses_special_files_full_and_read_only_file_systems(tmp_path, monkeypatch):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for special in ("/dev/full", "/dev/null", str(fifo)):
        with pytest.raises(types.argparse.ArgumentTypeError, match="not a regular file"):
            types.check_output(special)
    (tmp_path / "file").write_text("x")
    with pytest.raises(types.argparse.ArgumentTypeError, match="is a file"):
        types.check_output(tmp_path / "file" / "deeper" / "out.json")
    real = os.statvfs

    class Full:
        def __init__(self, stat, **changes):
            self.__dict__.update({name: getattr(stat, name) for name in dir(stat) if name.startswith("f_")}, **changes)

    monkeypatch.setattr(types.os, "statvfs", lambda p: Full(real(p), f_bfree=0, f_bavail=0))
    with pytest.raises(types.argparse.ArgumentTypeError, match="is full"):
        types.check_output(tmp_path / "new" / "out.json")
    monkeypatch.setattr(types.os, "statvfs", lambda p: Full(real(p), f_flag=os.ST_RDONLY))
    with pytest.raises(types.argparse.ArgumentTypeError, match="read-only"):
        types.check_output(tmp_path / "out.json", folder=True)


def test_the_gate_refuses_an_unknown_hypothesis_profile_from_the_environment(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "no_such_profile")
    with pytest.raises(SystemExit) as exit_info:
        gate.main(["--reports", str(tmp_path / "reports")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 1 and "no_such_profile" in err[0]
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize("record,field", [({"schema": "kernel.breakdown/1"}, "provenance"),
                                          ({"schema": "kernel.breakdown/1", "provenance": [], "config": {},
                                            "stages": {}, "graph": {}}, "provenance: [] is not of type")])
def test_a_malformed_record_is_one_line_naming_the_file_and_the_field(tmp_path, record, field):
    from properties.bench.breakdown import SCHEMA_FILE

    path = tmp_path / "r.json"
    path.write_text(json.dumps(record))
    with pytest.raises(records.RecordError) as error:
        records.read(path, SCHEMA_FILE)
    assert str(error.value).startswith(str(path)) and field in str(error.value) and "\n" not in str(error.value)
    for raw in (b"\x00\xff\x01", b'{"schema": "kernel.br'):  # binary, truncated
        path.write_bytes(raw)
        with pytest.raises(records.RecordError, match="not JSON"):
            records.read(path, SCHEMA_FILE)


def test_every_committed_record_matches_its_schema():
    """The schemas fit what the commands wrote (a schema that refused them would refuse the real thing)."""
    from oracles.mufu.__main__ import SURVEY_SCHEMA
    from properties.bench import breakdown, speed_record, variants
    from properties.mutants.__main__ import GENERATED_SCHEMA
    from properties.tools import speed

    results = REPO_ROOT / "properties" / "results"
    pairs = [(p, breakdown.SCHEMA_FILE) for p in results.glob("breakdown-*.json")]
    pairs += [(p, variants.SCHEMA_FILE) for p in results.glob("variants-*.json")]
    pairs += [(p, GENERATED_SCHEMA) for p in [*results.glob("mutants-generated-*.json"), *results.glob("evidence.json")]]
    pairs += [(p, speed_record.SPREAD_SCHEMA_FILE) for p in speed_record.spread_paths(results)]
    benches = sorted(results.glob(speed.RECORDS_GLOB))  # the bench records the speed check picks from
    pairs += [(p, speed_record.PROVENANCE_SCHEMA_FILE) for p in benches]
    pairs += [(p, speed_record.SECTION_SCHEMA_FILE) for p in benches
              if speed_record.SECTION in json.loads(p.read_text())]
    survey = json.loads((REPO_ROOT / "oracles" / "mufu" / "data" / "mufu-survey.json").read_text())
    records.check(survey, SURVEY_SCHEMA, "mufu-survey.json")
    assert len(pairs) >= 4
    for path, schema in pairs:
        records.read(path, schema)


@pytest.mark.parametrize("module", ["properties.soak", "properties.replay"])
def test_a_ctrl_c_while_a_command_starts_is_one_line_and_exit_130(module):
    """SIGINT a moment after start, while torch and the rest import: one line, exit 130, no traceback."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", module, "--help"], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert "Traceback" not in err and err.strip().splitlines() == [
        f"python -m {module}: INTERRUPTED by SIGINT while starting: nothing done (exit 130)"]
