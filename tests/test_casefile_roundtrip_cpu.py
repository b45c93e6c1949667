"""The case-file reader and writer (properties/engine/casefile.py) on a hand-made case: every bit kept through
a round trip, equal outputs grouped and ungrouped per implementation, runs of equal words written as
``word*n``; bad files refused with a ValueError naming what is wrong."""

import copy
import json

import numpy as np
import pytest

from kernel.layout import EXPERTS, TOP_K, metadata_size
from properties.engine import casefile
from properties.engine.cases import Outputs, RoutingCase
from properties.engine.implementations import writes
from properties.engine.poison import METADATA_POISON

TILE = 2


def _case():
    logits = np.zeros((2, EXPERTS), np.float32)
    logits[0, 3] = np.uint32(1).view(np.float32)  # a subnormal
    logits[1, 5] = -0.0
    bias = np.full(EXPERTS, -np.inf, np.float32)
    bias[:4] = 0.25
    return RoutingCase(logits, bias, np.float32(2.5), True, TILE, 4, 8, "hand made")


def _outputs():
    ids = np.arange(2 * TOP_K, dtype=np.int32).reshape(2, TOP_K)
    weights = np.full((2, TOP_K), 0.125, np.float32)
    other = weights.copy()
    other.view(np.uint32)[1, 7] ^= 1
    meta = np.arange(metadata_size(TILE), dtype=np.int32) - 5
    return {"model": Outputs(ids, weights, meta), "cute": Outputs(ids, other, meta),
            "triton": Outputs(ids, weights, None)}


RECORDED = casefile.recording(_outputs())
ORIGIN = {"property": "round trip"}


def _json():
    record = casefile.CaseFile(_case(), _outputs(), RECORDED, ORIGIN, [])
    return json.loads(json.dumps(casefile.to_json(record)))


def test_a_round_trip_keeps_every_bit_of_inputs_and_outputs():
    again = casefile.from_json(_json())
    assert again.case.same_inputs(_case()) and again.case.generator == "hand made"
    assert again.origin == ORIGIN and again.disagreements == []
    assert again.recorded == RECORDED and RECORDED["by"] == ["model", "cute", "triton"]
    assert np.float32(again.case.scale).view(np.uint32) == np.float32(2.5).view(np.uint32)
    assert sorted(again.outputs) == ["cute", "model", "triton"]
    for name, want in _outputs().items():
        got = again.outputs[name]
        for field in ("ids", "weights", "metadata"):
            w, g = getattr(want, field), getattr(got, field)
            assert (g is None) == (w is None), (name, field)
            if w is not None:
                assert g.dtype == w.dtype and g.view(np.uint32).tolist() == w.view(np.uint32).tolist(), (name, field)


def test_equal_outputs_are_grouped_and_distinct_ones_listed_apart():
    data = _json()
    assert [entry["by"] for entry in data["outputs"]["ids"]] == [["model", "cute", "triton"]]
    assert [entry["by"] for entry in data["outputs"]["weights"]] == [["model", "triton"], ["cute"]]
    assert [entry["by"] for entry in data["outputs"]["metadata"]] == [["model", "cute"]]
    assert data["inputs"]["bias"] == "3e800000*4 ff800000*252"
    assert data["inputs"]["logits"][0] == "00000000*3 00000001 00000000*252"


@pytest.mark.parametrize("text,size,want", [("7*3 -1 0*2", 6, [7, 7, 7, -1, 0, 0]), ("5", 1, [5])])
def test_runs_of_words_decode_to_their_counts(text, size, want):
    assert casefile.encode_ints(np.array(want)) == text
    assert casefile.decode_ints(text, size).tolist() == want


def _broken(change):
    data = _json()
    change(data)
    return data


@pytest.mark.parametrize("change,needle", [
    (lambda d: d.update(format="musespark-routing-case/0"), "format: 'musespark-routing-case/0' fails const"),
    (lambda d: d["inputs"].update(bias="3e800000*4 ff800000*251"), "expected 256 words, got 255"),
    (lambda d: d["inputs"]["logits"].__setitem__(0, "00000000*257"), "expected 256 words, got 257"),
    (lambda d: d["outputs"]["metadata"][0].update(value="0"), f"expected {metadata_size(TILE)} words, got 1"),
    (lambda d: d["outputs"]["weights"][0]["value"].__setitem__(0, "3e000000*7"), "expected 8 words, got 7"),
    (lambda d: d["inputs"].update(metadata_fill=0), f"is not this harness's poison {METADATA_POISON}"),
], ids=["format", "short bias", "long logits row", "short metadata", "short weights", "fill"])
def test_a_bad_file_is_refused_naming_what_is_wrong(tmp_path, change, needle):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_broken(change)))
    with pytest.raises(ValueError, match=needle):
        casefile.read(path)


def test_missing_fields_names_each_lost_recording():
    assert casefile.missing_fields(casefile.from_json(_json()), writes()) == []
    data = copy.deepcopy(_json())
    data["outputs"]["metadata"][0]["by"] = ["model"]
    del data["outputs"]["weights"][1]  # the entry of cute's weights
    assert casefile.missing_fields(casefile.from_json(data), writes()) == ["cute weights", "cute metadata"]
    data["recorded"]["by"].append("flashinfer")
    assert casefile.missing_fields(casefile.from_json(data), writes())[-1] == "flashinfer metadata"


def test_missing_fields_asks_no_metadata_without_a_tile():
    case = RoutingCase(np.zeros((1, EXPERTS), np.float32), np.zeros(EXPERTS, np.float32), np.float32(1.0), True,
                       None, 0, 0, "no tile")
    ids, weights = np.arange(TOP_K, dtype=np.int32)[None], np.full((1, TOP_K), 0.125, np.float32)
    outputs = {"model": Outputs(ids, weights, None), "cute": Outputs(ids, None, None)}
    record = casefile.CaseFile(case, outputs, {"by": ["model", "cute"]}, {}, [])
    assert casefile.missing_fields(record, writes()) == ["cute weights"]

