"""The model is trusted only where it was measured: before the GPU tier the gate compares this GPU with the
MUFU tables' provenance; on another model it measures a sample of every table and, on any difference, fails
the GPU tier with one line (which unit, how many of how many sampled entries, how to record this GPU's
tables) and runs the CPU tier alone; on a match it says what it sampled. The GPU and its measurements are
stand-ins here."""

import json

import numpy as np
import pytest

from oracles.mufu import recheck, tables
from properties.tools import gate

from test_gate_cpu import _BUILT, _summary

OTHER_GPU = {"gpu": "NVIDIA B200", "compute_capability": "10.0"}
FLIPPED = 5  # entries of the rcp table whose lowest bit the stand-in GPU flips


def _recorded_gpu():
    provenance = tables.read_provenance()["provenance"]
    return {"gpu": provenance["gpu"], "compute_capability": provenance["compute_capability"]}


def _stand_in(flip_rcp=0):
    """A measuring function answering from the recorded tables, the lowest bit of the first ``flip_rcp``
    sampled rcp entries flipped. Every table's inputs grow with the entry's index."""
    recorded, inputs = tables.load()[0], tables.inputs()

    def measure(table, input_bits):
        out = recorded[table][np.searchsorted(inputs[table], input_bits)].copy()
        if table == "rcp":
            out[:flip_rcp] ^= 1
        return out

    return measure


def _refuse(table, input_bits):
    raise AssertionError("measured on the GPU the tables were measured on")


def test_on_the_gpu_model_of_the_tables_nothing_is_measured():
    holds, line = recheck.check(_recorded_gpu(), _refuse)
    assert holds and "the GPU here" in line and _recorded_gpu()["gpu"] in line


def test_on_another_gpu_a_sample_that_matches_is_named_and_holds():
    holds, line = recheck.check(OTHER_GPU, _stand_in(), per_table=512, seed=7)
    assert holds and "\n" not in line
    assert "NVIDIA B200" in line and "512 random entries of each of ex2_pos, ex2_neg, rcp (seed 7)" in line


def test_on_another_gpu_a_difference_is_one_line_naming_the_unit_and_the_count():
    holds, line = recheck.check(OTHER_GPU, _stand_in(flip_rcp=FLIPPED), per_table=512, seed=7)
    assert not holds and "\n" not in line
    assert f"MUFU.RCP in {FLIPPED} of 512 sampled entries" in line and "MUFU.EX2" not in line
    assert line.endswith(recheck.MEASURE_COMMAND)


@pytest.fixture
def gpu_gate(monkeypatch):
    """The gate on a stand-in GPU of another model; returns the pytest arguments its suite was given."""
    given = []

    def run_tests(scratch, profile, workers, pytest_args, gpus=0, meanwhile=None):
        given.append(pytest_args)
        again = meanwhile()
        if again is not None:
            given.append(again)
        return 0, _summary()

    monkeypatch.setattr(gate, "cuda_reason", lambda: None)
    monkeypatch.setattr(gate, "gpu_count", lambda: 1)
    monkeypatch.setattr(gate, "oracles_not_run", lambda: {})
    monkeypatch.setattr(gate, "build_flashinfer", lambda require_gpu: _BUILT)
    monkeypatch.setattr(gate, "run_tests", run_tests)
    monkeypatch.setattr(recheck, "this_gpu", lambda: OTHER_GPU)
    return given


@pytest.mark.parametrize("flip, verdict", [(0, "PASS"), (FLIPPED, "FAIL")])
def test_the_gate_runs_the_gpu_tier_only_where_the_tables_hold(flip, verdict, gpu_gate, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(recheck, "measure_on_gpu", _stand_in(flip_rcp=flip))
    rc = gate.main(["--reports", str(tmp_path), "--profile", "ci", "--", "-k", "x"])
    record = json.loads((tmp_path / "verify.json").read_text())
    out = capsys.readouterr().out
    assert record["verdict"] == verdict and rc == (verdict == "FAIL")
    assert record["mufu_tables"]["ran"] and "NVIDIA B200" in record["mufu_tables"]["why"]
    assert f"gate: mufu tables: {record['mufu_tables']['why']}" in out
    if flip:  # the suite started with its GPU tier, stopped once the tables differed, and ran again without it
        assert gpu_gate == [["-m", "not deep", "-k", "x"], ["-m", "not deep", "-k", "x", "-m", "(not deep) and not gpu"]]
        assert record["reasons"] == [f"GPU tier not run: {record['mufu_tables']['why']}"]
        assert "MUFU.RCP in 5 of" in record["reasons"][0]
    else:
        assert gpu_gate == [["-m", "not deep", "-k", "x"]]
