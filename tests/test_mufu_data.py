"""The measured MUFU data: its size, provenance, integrity, and the exhaustive proof it was checked by."""

import json

import numpy as np
import pytest
import torch

from oracles.mufu import tables
from oracles.mufu.__main__ import PROOF_FILE, _Tally, model_source_sha256
from oracles.mufu.baseline import BASELINES, TABLE_SIZE

FULL_SWEEP = 1 << 32
PRIMITIVES_SWEPT = ("ex2_approx_ftz_f32", "ex2_approx_f32", "rcp_approx_ftz_f32", "sigmoid_f32",
                    "div_full_f32(1.0, y)")


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
        "the primitive model changed since it was proved: run `make prove-primitives` on the H200")
    assert proof["provenance"]["gpu"] == "NVIDIA H200"
    results = proof["results"]
    for name in PRIMITIVES_SWEPT:
        assert results[name]["inputs"] == FULL_SWEEP and results[name]["mismatches"] == 0, name
    pairs = results["div_full_f32(x, y) exponent pairs"]
    assert pairs["inputs"] >= 10**9 and pairs["mismatches"] == 0


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
