"""The regression corpus (corpora/regression/): exactly CASES_PER_GENERATOR cases of every generator, every
recorded output replayed against the NumPy model bit for bit, every recording holding each field its
implementation writes, and the outputs recorded on an H200 by every implementation (``python -m
properties.corpus record`` on the GPU). One changed id, weight bit or metadata element is caught."""

import copy
import json
from collections import defaultdict

import numpy as np
import pytest

from kernel.layout import TOP_K, metadata_size
from properties.corpus import CASES_PER_GENERATOR, regression_path
from properties.engine import casefile
from properties.engine.implementations import REAL, writes
from properties.replay import main as replay_main
from properties.replay import replay
from properties.inputs.strategies import GENERATORS

H200 = "NVIDIA H200"


def _corpus():
    """generator -> its regression case files."""
    by_generator = defaultdict(list)
    for path in casefile.case_files([casefile.REGRESSION_DIR]):
        by_generator[path.name.rsplit("-", 1)[0]].append(path)
    return by_generator


CORPUS = _corpus()


def test_corpus_holds_exactly_its_cases_of_every_generator():
    assert sorted(CORPUS) == sorted(GENERATORS)
    for generator, paths in CORPUS.items():
        want = [regression_path(generator, i) for i in range(CASES_PER_GENERATOR)]
        assert sorted(paths) == want, f"{generator}: {len(paths)} cases, expected {CASES_PER_GENERATOR}"


@pytest.mark.parametrize("generator", sorted(GENERATORS))
def test_every_recorded_output_equals_the_model(generator):
    assert CORPUS[generator], f"no regression cases of {generator}"
    for path in CORPUS[generator]:
        record = casefile.read(path)
        assert record.case.generator == generator and record.disagreements == []
        live, found = replay(record)
        assert found == [], f"{path}: {found[:3]}"


def test_every_recording_holds_every_field_its_implementation_writes():
    """ids and weights of model, Triton and the kernel; metadata of model, kernel and FlashInfer with a tile."""
    missing = [f"{path.name}: {casefile.missing_fields(casefile.read(path), writes())}"
               for paths in CORPUS.values() for path in paths if casefile.missing_fields(casefile.read(path), writes())]
    assert not missing, f"{len(missing)} cases lack recorded outputs, e.g. {missing[:3]}"


def test_corpus_was_recorded_on_the_h200_by_every_implementation():
    """Until ``python -m properties.corpus record`` has run on the H200, the outputs are the model's own
    (recorded on a CPU) and this fails: they are not hardware truth."""
    not_h200, missing = [], []
    for paths in CORPUS.values():
        for path in paths:
            record = casefile.read(path)
            if record.recorded["environment"]["gpu"] != H200:
                not_h200.append(path.name)
            wanted = set(REAL) if record.case.has_metadata else set(REAL) - {"flashinfer"}
            if not wanted <= set(record.recorded["by"]):
                missing.append(f"{path.name}: {sorted(wanted - set(record.recorded['by']))}")
    assert not not_h200, f"{len(not_h200)} cases not recorded on an {H200}, e.g. {not_h200[:3]}"
    assert not missing, f"{len(missing)} cases lack outputs of: {missing[:3]}"


# ---------------------------------------------------------------------------------------------- one change caught

def _metadata_case():
    return next(p for p in CORPUS["tie_within_lane"] if casefile.read(p).case.has_metadata)


def _split_off(data, field, name, change):
    """``data`` with ``name``'s recorded ``field`` given an entry of its own, changed by ``change`` (a function
    of the decoded value, in place)."""
    data = copy.deepcopy(data)
    record = casefile.from_json(data)
    value = getattr(record.outputs[name], field).copy()
    change(value)
    for entry in data["outputs"][field]:
        entry["by"] = [n for n in entry["by"] if n != name]
    encoded = value.tolist() if field == "ids" else (
        [casefile.encode_floats(row) for row in value] if field == "weights" else casefile.encode_ints(value))
    data["outputs"][field] = [e for e in data["outputs"][field] if e["by"]] + [{"by": [name], "value": encoded}]
    return data


def _flip_id(ids):
    ids[0, TOP_K - 1] = next(e for e in range(256) if e not in ids[0])


def _flip_weight_bit(weights):
    weights.view(np.uint32)[0, 0] ^= 1


def _flip_metadata_element(meta):
    meta[metadata_size(1) // 2] ^= 1


@pytest.mark.parametrize("field,change", [("ids", _flip_id), ("weights", _flip_weight_bit),
                                          ("metadata", _flip_metadata_element)], ids=["id", "weight-bit", "metadata"])
def test_one_changed_recorded_value_is_caught(field, change):
    source = _metadata_case()
    data = json.loads(source.read_text())
    assert replay(casefile.from_json(data))[1] == []
    changed = casefile.from_json(_split_off(data, field, "cute", change))
    found = replay(changed)[1]
    assert [(d["implementation"], d["field"], d["count"]) for d in found] == [("cute (recorded)", field, 1)], found


def test_replay_command_fails_on_a_changed_recorded_bit(tmp_path, capsys):
    """The replay command can fail: one weight bit flipped in a recorded output is reported and exits 1."""
    source = CORPUS["tie_within_lane"][0]
    assert replay_main([str(source)]) == 0 and "AGREES" in capsys.readouterr().out
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(_split_off(json.loads(source.read_text()), "weights", "cute", _flip_weight_bit)))
    assert replay_main([str(changed)]) == 1
    assert "DIFFERS" in capsys.readouterr().out


@pytest.mark.parametrize("field,name", [("metadata", "cute"), ("weights", "triton"), ("ids", "model"),
                                        ("metadata", "flashinfer")])
def test_a_recording_that_lost_a_field_is_refused(tmp_path, capsys, field, name):
    data = json.loads(_metadata_case().read_text())
    for entry in data["outputs"][field]:
        entry["by"] = [n for n in entry["by"] if n != name]
    assert casefile.missing_fields(casefile.from_json(data), writes()) == [f"{name} {field}"]
    lost = tmp_path / "lost.json"
    lost.write_text(json.dumps(data))
    assert replay_main([str(lost)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"replay: cannot read {lost}: outputs: recorded outputs missing: {name} {field}"]
