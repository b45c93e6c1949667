"""A run that checked nothing never passes (issue 20, item 1): replay of a case with nothing recorded where only
the model runs, a soak with nothing under test or of no row, a mutant run of no mutant. Each fails, and says
what was not checked."""

import json

import pytest

from properties import replay
from properties.engine import casefile, implementations
from properties.mutants import harness, harness_run
from properties.mutants.__main__ import ran_a_mutant
from properties.soak.__main__ import _verdict
from properties.soak.__main__ import main as soak_main

CASE = casefile.REGRESSION_DIR / "all_equal-000.json"


@pytest.fixture
def model_only(monkeypatch):
    """Replay as on a machine where only the model runs (on a GPU the other implementations would compare)."""
    monkeypatch.setattr(replay, "run_all", lambda case, names=None: implementations.run_all(case, [implementations.REFERENCE]))


def _unrecorded(tmp_path):
    data = json.loads(CASE.read_text())
    data["outputs"] = {field: [] for field in data["outputs"]}
    data["recorded"]["by"] = ["nobody"]  # names no implementation, so no recorded field is missing
    path = tmp_path / "unrecorded.json"
    path.write_text(json.dumps(data))
    return path


def test_replay_of_a_case_with_nothing_to_compare_fails_saying_so(tmp_path, model_only, capsys):
    assert replay.main([str(_unrecorded(tmp_path))]) == replay.NOTHING_COMPARED == 3
    out = capsys.readouterr().out.splitlines()
    assert "NOTHING COMPARED: no recorded output" in out[-3]
    assert out[-2] == "replay: 1 case file(s): 0 agree, 0 differ, 0 unreadable, 1 compared nothing"
    assert out[-1] == "replay: NOTHING COMPARED (exit 3)"


def test_replay_compares_a_recording_with_the_live_model(model_only, capsys):
    """The same case with its recording: the recorded outputs are compared, so it agrees (exit 0)."""
    assert replay.main([str(CASE)]) == replay.AGREE
    assert capsys.readouterr().out.splitlines()[-1] == "replay: AGREE (exit 0)"


def test_a_soak_with_nothing_under_test_is_refused(tmp_path, capsys):
    summary = tmp_path / "s.json"
    with pytest.raises(SystemExit) as exit_info:
        soak_main(["--device", "cpu", "--no-progress", "--rows", "16", "--out", str(summary)])
    assert exit_info.value.code == 2 and "--impl: no implementation under test on cpu" in capsys.readouterr().err
    assert not summary.exists()


def test_the_model_alone_asked_for_by_name_runs_and_says_so(tmp_path, capsys):
    rc = soak_main(["--device", "cpu", "--no-progress", "--rows", "16", "--b", "2", "--problems", "8", "--impl",
                    "model", "--out", str(tmp_path / "s.json"), "--failures-dir", str(tmp_path / "f")])
    last = capsys.readouterr().out.splitlines()[-1]
    assert rc == 0 and last.startswith("soak: PASS: ") and last.endswith(" (model only) (exit 0)"), last


def test_a_soak_that_verified_no_row_fails():
    summary = {"model_mismatches": [], "tally": {"rows": 0, "disagreements": {}, "crosscheck_rows": 0}}
    assert _verdict(summary, []) == (1, "soak: NOTHING VERIFIED: 0 rows (model only) (exit 1)")
    summary["tally"]["rows"] = 8
    assert _verdict(summary, ["cute"]) == (
        0, "soak: PASS: 8 rows agreed with the model on the device, 0 of them also compared with the NumPy model "
           "(cute) (exit 0)")


def test_a_harness_mutant_run_of_no_mutant_fails(monkeypatch):
    monkeypatch.setattr(harness, "CATALOG", ())
    monkeypatch.setattr(harness, "check_catalog", lambda root: None)  # (the real catalog's edits: checked elsewhere)
    monkeypatch.setattr(harness_run, "run_one", lambda mutant, nodeids: {"verdict": "passed", "tests": {},
                                                                        "log": "", "seconds": 0.0})
    record = harness_run.run((), out=None, log=lambda line: None)
    assert record["verdict"] == "FAIL" and record["failures"] == ["no mutant ran: nothing was checked"]


def test_a_kernel_mutant_run_that_probed_no_mutant_fails():
    untouched = {"tiers": {}, "prefilter": None, "verdict": "not_run"}
    assert not ran_a_mutant({"mutants": [untouched, {**untouched, "prefilter": {"compiled": 0}}]})
    assert not ran_a_mutant({"mutants": []})
    assert ran_a_mutant({"mutants": [untouched, {**untouched, "prefilter": {"compiled": 2}}]})
    assert ran_a_mutant({"mutants": [untouched, {**untouched, "tiers": {"differential": {"killed": False}}}]})
    assert ran_a_mutant({"mutants": [untouched, {**untouched, "verdict": "killed"}]})  # kept from a resumed record
