"""The soak's --device is checked before any work (an index beyond the visible devices, or CUDA where there is
none: one line naming --device, exit 2), and its last line says what was compared: rows against the model on
the device, and how many of them the NumPy model compared too (for the model alone, only those)."""

import pytest

from properties.soak import dist
from properties.soak.__main__ import _verdict
from properties.soak.__main__ import main as soak_main


def test_a_device_index_beyond_the_visible_ones_is_one_line_naming_device(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(dist.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(dist.torch.cuda, "device_count", lambda: 1)
    with pytest.raises(SystemExit) as exit_info:
        soak_main(["--device", "cuda:3", "--no-progress", "--impl", "model", "--rows", "16", "--out",
                   str(tmp_path / "s.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 1, err
    assert "--device cuda:3" in err[0] and "1 CUDA device(s)" in err[0] and not (tmp_path / "s.json").exists()


def _summary(rows, crosscheck_rows, disagreements=None):
    return {"model_mismatches": [], "tally": {"rows": rows, "crosscheck_rows": crosscheck_rows,
                                              "disagreements": disagreements or {}}}


def test_the_model_alone_counts_only_the_rows_the_numpy_model_compared():
    assert _verdict(_summary(992, 496), []) == (
        0, "soak: PASS: 496 rows of the model on the device equal to the NumPy model's, of 992 drawn (model only) "
           "(exit 0)")
    status, line = _verdict(_summary(992, 0), [])
    assert status == 1 and line.startswith("soak: NOTHING VERIFIED: 0 of 992 rows compared with the NumPy model")


def test_an_implementation_counts_its_rows_and_those_the_numpy_model_compared_too():
    assert _verdict(_summary(4096, 32), ["cute"]) == (
        0, "soak: PASS: 4096 rows agreed with the model on the device, 32 of them also compared with the NumPy "
           "model (cute) (exit 0)")
