"""The measured MUFU data, the coefficients fitted to it, and the exhaustive proof the model was checked by."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from oracles import numpy_model
from oracles.mufu import fit, interpolator, tables
from oracles.mufu.__main__ import NUMPY_PATH_FILE, PROOF_FILE, _Tally, model_source_sha256
from oracles.mufu.baseline import BASELINES, TABLE_SIZE

from helpers import DIV_PAIRS, PRIMITIVES_SWEPT

FULL_SWEEP = 1 << 32


def test_tables_fit_in_one_megabyte_with_provenance():
    prov = tables.read_provenance()
    assert tables.DATA_FILE.stat().st_size == prov["data_bytes"] <= 1 << 20
    for key in ("gpu", "compute_capability", "driver", "cuda", "date", "commit"):
        assert prov["provenance"][key] not in ("", "unknown"), key
    assert prov["provenance"]["gpu"] == "NVIDIA H200" and prov["provenance"]["compute_capability"] == "9.0"


def test_tables_decode_to_their_recorded_hashes():
    decoded, constants = tables.load()
    assert set(decoded) == set(tables.TABLE_NAMES)
    assert all(t.shape == (TABLE_SIZE,) for t in decoded.values())
    assert constants == {"nan": 0x7FFFFFFF}


@pytest.mark.long
def test_encoding_round_trips_and_rejects_a_corrupted_table():
    decoded, _ = tables.load()
    data, meta = tables.encode(decoded)
    assert data == tables.DATA_FILE.read_bytes(), "encoding is not deterministic"
    meta = json.loads(json.dumps(meta))
    meta["rcp"]["sha256"] = "0" * 64
    with pytest.raises(ValueError, match="rcp"):
        tables.decode(data, meta)


def test_measured_tables_are_near_the_correctly_rounded_values():
    decoded, _ = tables.load()
    for name in tables.TABLE_NAMES:
        delta = decoded[name].astype(np.int64) - BASELINES[name]().view(np.uint32)
        assert -2 <= delta.min() and delta.max() <= 1, name


def test_exhaustive_proof_shows_zero_mismatches_for_the_stored_tables():
    proof = json.loads(PROOF_FILE.read_text())
    assert proof["table_data_sha256"] == tables.read_provenance()["data_sha256"]
    assert proof.get("model_source_sha256") == model_source_sha256(), (
        "the primitive model (its sources or coefficients) changed since it was proved: run "
        "`make prove-primitives` on the H200 and commit oracles/mufu/data/exhaustive-proof.json")
    assert proof["provenance"]["gpu"] == "NVIDIA H200"
    results = proof["results"]
    for name in PRIMITIVES_SWEPT:
        assert results[name]["inputs"] == FULL_SWEEP and results[name]["mismatches"] == 0, name
    pairs = results[DIV_PAIRS]
    assert pairs["inputs"] >= 10**9 and pairs["mismatches"] == 0
    assert proof["sigmoid_f32_model_throughput"]["elements"] >= 1 << 28


def test_numpys_common_path_sigmoid_equals_the_proved_generic_path_on_every_input():
    """The exhaustive proof ran the model's generic path (torch); NumPy's sigmoid_f32 takes a common path of its
    own for |x| below about 87.3. Its record (`python -m oracles.mufu prove-numpy-path`, CPU) compares the two on
    all 2^32 inputs, bit for bit, for the current model sources."""
    record = json.loads(NUMPY_PATH_FILE.read_text())
    assert record["model_source_sha256"] == model_source_sha256(), (
        "the primitive model changed since its NumPy path was compared: run `python -m oracles.mufu "
        "prove-numpy-path` and commit oracles/mufu/data/numpy-path-proof.json")
    result = record["result"]
    assert result["inputs"] == FULL_SWEEP
    assert result["mismatches"] == result["nan_input_bit_differences"] == 0, result["first_mismatches"]


_MODEL_OF_TABLE = {"ex2_pos": numpy_model.ex2_approx_ftz_f32, "ex2_neg": numpy_model.ex2_approx_ftz_f32,
                   "rcp": numpy_model.rcp_approx_ftz_f32}


@pytest.mark.parametrize("name", tables.TABLE_NAMES)
def test_the_compact_model_gives_every_measured_table_entry(name):
    measured, _ = tables.load()
    got = _MODEL_OF_TABLE[name](tables.inputs()[name].view(np.float32)).view(np.uint32)
    bad = np.flatnonzero(got != measured[name])
    assert got.size == TABLE_SIZE and bad.size == 0, (
        f"{bad.size} of {TABLE_SIZE} entries differ, first at f = {bad[:8].tolist()}")


def test_fit_rederives_the_stored_coefficients_byte_for_byte():
    record, _ = fit.derive()
    assert fit.serialise(record) == interpolator.COEFFICIENT_FILE.read_bytes(), "run `python -m oracles.mufu fit`"


def test_coefficients_are_small_and_name_the_tables_they_were_fitted_to():
    prov = tables.read_provenance()
    record = interpolator.read()
    assert interpolator.COEFFICIENT_FILE.stat().st_size <= fit.MAX_FILE_BYTES
    assert record["tables_sha256"] == prov["data_sha256"] == tables.sha256(tables.DATA_FILE.read_bytes())
    assert record["nan"] == prov["model_constants"]["nan"]
    assert {name: record["units"][name]["segment_bits"] for name in interpolator.UNIT_NAMES} == {"ex2": 6, "rcp": 7}


def test_a_changed_coefficient_changes_the_unit():
    entry = dict(interpolator.read()["units"]["rcp"])
    units = interpolator.decode_unit(entry)
    entry["c2"] = interpolator.encode_unit([0] * 128, [0] * 128, units["c2"] + 1)["c2"]
    assert (interpolator.decode_unit(entry)["c2"] == units["c2"] + 1).all()
    with pytest.raises(ValueError, match="hex digits"):
        interpolator.encode_unit([1 << 28], [0], [0])


@pytest.mark.parametrize("x_bits,k", [(16, 17), (17, 19)])
def test_truncated_square_keeps_exactly_the_partial_products_of_weight_at_least_2_to_k(x_bits, k):
    x = np.arange(1 << x_bits, dtype=np.int64)
    bit = [(x >> i) & 1 for i in range(x_bits)]
    kept = np.zeros_like(x)
    for i in range(x_bits):
        for j in range(i, x_bits):
            weight = 2 * i if i == j else i + j + 1  # the folded matrix: x_i^2 = x_i, 2 x_i x_j one column up
            if weight >= k:
                kept += (bit[i] & bit[j]) << weight
    assert (interpolator.truncated_square(x, k) == kept >> k).all()


def test_the_model_loads_no_measured_table():
    code = ("import sys, numpy as np; from oracles import numpy_model as m; "
            "x = np.linspace(-200, 200, 4096, dtype=np.float32); "
            "m.sigmoid_f32(x); m.div_full_f32(x, x); m.ex2_approx_f32(x); "
            "print(sorted(n for n in sys.modules if n.startswith('oracles.mufu')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout
    assert out.strip() == "['oracles.mufu', 'oracles.mufu.interpolator']"


def _f32(bits):
    return torch.tensor(np.array(bits, np.uint32).view(np.int32)).view(torch.float32)


def test_the_proof_tally_counts_every_difference_and_only_nan_input_slack():
    nan, qnan, one, two = 0x7FFFFFFF, 0x7FC00000, 0x3F800000, 0x40000000
    x = _f32([one, nan, one, nan, one])
    hw = _f32([one, nan, qnan, one, two])
    model = _f32([one, qnan, nan, one, one])
    tally = _Tally()
    tally.add([x], hw, model)
    result = tally.result()
    # Lane 1: NaN input, both NaN: equal. Lane 2: NaN from a number: bits must match. Lane 4: plain mismatch.
    assert result["mismatches"] == 2 and result["nan_input_bit_differences"] == 1
    assert [m["inputs"] for m in result["first_mismatches"]] == [["0x3f800000"], ["0x3f800000"]]
