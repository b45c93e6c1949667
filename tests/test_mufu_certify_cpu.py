"""A GPU model other than the one the MUFU tables were measured on is trusted where its committed certification
record (oracles/mufu/certification.py, written by `python -m oracles.mufu certify-card`) certifies it: the
tables check and the approximate ops read "measured on this GPU model" and name the record, the gate names
the cards. A record whose tables or special values differ, or whose proof had mismatches, refuses the card;
one for another card, other committed tables or a model changed since is not used (the sample is measured as
without one); a malformed record is refused in one line naming the file and the field. The GPU, its
measurements and its proof are stand-ins here; the records are the ones certify-card writes from them."""

import importlib
import json
import lzma

import pytest

from common import provenance
from oracles.mufu import certification, proof, recheck, tables
from oracles.mufu.baseline import TABLE_SIZE
from properties.tools import gate

from test_gate_mufu_cpu import _refuse, _stand_in, gpu_gate  # noqa: F401 (gpu_gate: a fixture)

mufu = importlib.import_module("oracles.mufu.__main__")

H100 = {"gpu": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}
B200 = {"gpu": "NVIDIA B200", "compute_capability": "10.0"}
RECORD = "certified-nvidia-h100-80gb-hbm3.json"
FLIPPED_AT = (3, 1000, 4_000_000)  # rcp entries whose lowest bit the stand-in GPU flips


def _result(inputs, mismatches=0):
    return {"inputs": inputs, "mismatches": mismatches, "nan_input_bit_differences": 0, "first_mismatches": [],
            "seconds": 0.5}


def _certify(folder, flip=()):
    """certify-card on a stand-in H100 answering with the committed tables (``flip``: rcp entries whose lowest
    bit it flips) and a clean proof: (exit status, the record, what it printed is left to capsys)."""
    committed = tables.load()[0]
    measured = {name: bits.copy() for name, bits in committed.items()}
    measured["rcp"][list(flip)] ^= 1
    spec = tables.read_provenance()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(recheck, "this_gpu", lambda: dict(H100))
        mp.setattr(provenance, "record", lambda: {**H100, "driver": "d", "cuda": "c", "commit": "x", "date": "t"})
        mp.setattr(mufu, "_measure_tables", lambda: measured)
        mp.setattr(mufu, "_measure_specials", lambda: (spec["special_inputs"], spec["model_constants"]))
        mp.setattr(mufu, "prove_primitives", lambda model: {k: _result(n) for k, n in proof.PROOF_INPUTS.items()})
        mp.setattr(mufu, "prove_approx", lambda: {op: _result(1 << 32) for op in proof.APPROX_F32}
                   | {op: _result(1 << 16) for op in proof.APPROX_16})
        rc = mufu.certify_card(folder / RECORD)
    return rc, json.loads((folder / RECORD).read_text())


@pytest.fixture(scope="module")
def certified(tmp_path_factory):
    """The record certify-card writes where every table entry equals the committed one and the proof is clean."""
    return _certify(tmp_path_factory.mktemp("equal"))[1]


def _copy(record):
    return json.loads(json.dumps(record))


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """The folder the committed records are read from, empty."""
    monkeypatch.setattr(certification, "FOLDER", tmp_path)
    return tmp_path


def _commit(folder, record):
    (folder / RECORD).write_text(json.dumps(record))


def test_certify_card_on_equal_tables_writes_a_record_that_certifies_the_card(certified):
    assert certified["verdict"] == "CERTIFIED" and certified["measured_tables_file"] is None
    spec = tables.read_provenance()
    for name, entry in certified["tables"].items():
        assert entry["entries"] == TABLE_SIZE and entry["differing"] == 0 and entry["first_differing"] == []
        assert entry["sha256"] == entry["committed_sha256"] == spec["tables"][name]["sha256"]
    assert certified["special_values"]["equal"] and certified["committed_tables"]["data_sha256"] == spec["data_sha256"]
    assert certified["proof"]["model_source_sha256"] == proof.model_source_sha256()
    assert certified["provenance"]["gpu"] == H100["gpu"] and "certify-card" not in certified["why"]


@pytest.mark.long
def test_certify_card_where_a_table_differs_fails_loudly_and_keeps_this_cards_tables(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(tables, "_XZ_FILTERS", [{"id": lzma.FILTER_LZMA2, "preset": 0}])  # the format, fast
    rc, record = _certify(tmp_path, FLIPPED_AT)
    assert rc == 1 and record["verdict"] == "FAIL"
    rcp = record["tables"]["rcp"]
    assert rcp["differing"] == len(FLIPPED_AT) and [d["index"] for d in rcp["first_differing"]] == list(FLIPPED_AT)
    want = int(tables.load()[0]["rcp"][FLIPPED_AT[0]])
    assert rcp["first_differing"][0] == {"index": 3, "input": "0x3f800003", "measured": f"0x{want ^ 1:08x}",
                                         "committed": f"0x{want:08x}"}
    assert record["tables"]["ex2_pos"]["differing"] == record["tables"]["ex2_neg"]["differing"] == 0
    differ = f"MUFU.RCP in 3 of {TABLE_SIZE:,} entries of table rcp (first: input 0x3f800003"
    assert differ in record["why"] and f"certify-card: FAILED: {record['why']}" in capsys.readouterr().out
    kept = record["measured_tables_file"]
    data = (tmp_path / kept["file"]).read_bytes()
    assert kept["file"] == RECORD.replace(".json", ".bin") and tables.sha256(data) == kept["sha256"]
    decoded = tables.decode(data, kept["tables"])
    assert int(decoded["rcp"][FLIPPED_AT[0]]) == want ^ 1 and tables.sha256(decoded["rcp"]) == rcp["sha256"]
    monkeypatch.setattr(certification, "FOLDER", tmp_path)  # the record where certify-card wrote it
    holds, line = recheck.check(H100, _refuse)
    assert not holds and differ in line


def test_a_certified_card_is_trusted_like_the_tables_own_and_nothing_is_sampled(certified, folder):
    _commit(folder, certified)
    holds, line = recheck.check(H100, _refuse)
    assert holds and "\n" not in line and line.startswith("MUFU tables measured on this GPU model, NVIDIA H100")
    assert RECORD in line
    trust = recheck.approx_trust(device=H100)
    assert all(trusted and RECORD in why for trusted, why in trust.values()), trust
    assert certification.cards() == [
        "NVIDIA H200 (compute capability 9.0): measured (mufu-tables.json)",
        f"NVIDIA H100 80GB HBM3 (compute capability 9.0): certified ({RECORD})"]


def _mismatches(record):
    record["proof"]["results"]["sigmoid_f32"]["mismatches"] = 3


def _stale(record):
    record["proof"]["model_source_sha256"] = "0" * 64


def _another_card(record):
    record["provenance"]["gpu"] = B200["gpu"]


def _other_tables(record):
    record["tables"]["ex2_pos"]["committed_sha256"] = "1" * 64


def _tables_differ(record):
    committed = int(tables.load()[0]["rcp"][7])
    record["tables"]["rcp"].update(differing=2, first_differing=[
        {"index": 7, "input": "0x3f800007", "measured": f"0x{committed ^ 1:08x}", "committed": f"0x{committed:08x}"}])


def _special_values(record):
    record["special_values"].update(equal=False, differing=["model_constants.nan"])


def _partial(record):
    record["tables"]["rcp"]["entries"] = 4096


# (how the record is changed, what the line names): DIFFERS refuses the card, NOT_USED samples as without one
REFUSED = [(_tables_differ, f"tables differ from the committed ones: MUFU.RCP in 2 of {TABLE_SIZE:,} entries of "
                             "table rcp (first: input 0x3f800007"),
           (_mismatches, "the model's proof on this GPU found mismatches: sigmoid_f32 3"),
           (_special_values, "special values differ from the committed ones: model_constants.nan")]
NOT_USED = [(_stale, "the model changed since its proof"),
            (_another_card, "is the record of NVIDIA B200 (compute capability 9.0)"),
            (_other_tables, "compared table ex2_pos with other tables than the committed ones"),
            (_partial, f"compared 4,096 of the {TABLE_SIZE:,} entries of table rcp")]


@pytest.mark.parametrize("change, why", REFUSED, ids=[c.__name__ for c, _ in REFUSED])
def test_a_record_that_shows_the_model_wrong_here_refuses_the_card(change, why, certified, folder):
    record = _copy(certified)
    change(record)
    _commit(folder, record)
    holds, line = recheck.check(H100, _refuse)
    assert not holds and why in line and RECORD in line and "\n" not in line
    assert not any(trusted for trusted, _ in recheck.approx_trust(device=H100).values())
    assert len(certification.cards()) == 1


@pytest.mark.parametrize("change, why", NOT_USED, ids=[c.__name__ for c, _ in NOT_USED])
def test_a_record_that_does_not_speak_for_this_card_and_model_is_not_used(change, why, certified, folder):
    record = _copy(certified)
    change(record)
    _commit(folder, record)
    holds, line = recheck.check(H100, _stand_in(), per_table=512, seed=7)
    assert holds and why in line and "sampled instead" in line and "measured on this GPU model" not in line
    assert "512 random entries of each of ex2_pos, ex2_neg, rcp (seed 7)" in line
    trust = recheck.approx_trust(device=H100)
    assert not any(trusted for trusted, _ in trust.values()) and why in trust["tanh_approx_f32"][1]
    assert len(certification.cards()) == 1


def test_without_a_record_the_sample_is_measured_as_before(folder):
    holds, line = recheck.check(H100, _stand_in(), per_table=512, seed=7)
    assert holds and "certif" not in line and "512 random entries" in line
    trusted, why = recheck.approx_trust(device=H100)["tanh_approx_f32"]
    assert not trusted and f"no certification record {provenance.shown(folder / RECORD)}" in why


def test_a_record_is_found_by_its_cards_name_only(certified, folder):
    (folder / "certified-nvidia-h100.json").write_text(json.dumps(certified))
    assert certification.path_for(H100).name == RECORD and len(certification.cards()) == 1
    assert "certif" not in recheck.check(H100, _stand_in(), per_table=512, seed=7)[1]


def _drop_proof(record):
    del record["proof"]


def _string_count(record):
    record["tables"]["rcp"]["differing"] = "0"


def _float_count(record):
    record["tables"]["rcp"]["entries"] = float(TABLE_SIZE)


def _short_sha(record):
    record["proof"]["approximate_ops"]["model_source_sha256"] = "abc"


def _table_missing(record):
    del record["tables"]["ex2_neg"]


def _unlisted(record):
    record["tables"]["rcp"]["differing"] = 2


MALFORMED = [(_drop_proof, "(top level): 'proof' is a required property"),
             (_string_count, "tables.rcp.differing: '0' is not of type 'integer'"),
             (_float_count, "tables.rcp.entries: 8388608.0 is not of type 'integer'"),
             (_short_sha, "proof.approximate_ops.model_source_sha256: 'abc' does not match"),
             (_table_missing, "tables: names ['ex2_pos', 'rcp'], not ['ex2_pos', 'ex2_neg', 'rcp']"),
             (_unlisted, "tables.rcp.first_differing: 0 entries listed, 2 differing")]


@pytest.mark.parametrize("change, why", MALFORMED, ids=[c.__name__ for c, _ in MALFORMED])
def test_a_malformed_record_is_refused_in_one_line_naming_the_file_and_the_field(change, why, certified, folder):
    record = _copy(certified)
    change(record)
    _commit(folder, record)
    for call in (lambda: recheck.check(H100, _refuse), lambda: recheck.approx_trust(device=H100), certification.cards):
        with pytest.raises(ValueError) as caught:
            call()
        line = str(caught.value)
        assert line.startswith(f"{provenance.shown(folder / RECORD)}: {why}") and "\n" not in line


def test_a_record_that_is_not_json_is_refused_by_name(folder):
    (folder / RECORD).write_text("{")
    with pytest.raises(ValueError, match=f"^{provenance.shown(folder / RECORD)}: not JSON: "):
        recheck.check(H100, _refuse)


def test_the_committed_records_certify_their_cards():
    """Every certified/certified-*.json is of the schema's form and certifies its card for the model as it is now;
    the tables' own GPU comes first."""
    committed = sorted(certification.FOLDER.glob(f"{certification.PREFIX}*.json"))
    lines = certification.cards()
    assert lines[0] == "NVIDIA H200 (compute capability 9.0): measured (mufu-tables.json)"
    assert [line.rsplit("(", 1)[1].rstrip(")") for line in lines[1:]] == [path.name for path in committed]


def test_the_gate_names_the_cards_and_trusts_a_certified_one(certified, folder, gpu_gate, monkeypatch, tmp_path_factory,
                                                              capsys):
    _commit(folder, certified)
    monkeypatch.setattr(recheck, "this_gpu", lambda: dict(H100))
    monkeypatch.setattr(recheck, "measure_on_gpu", _refuse)
    reports = tmp_path_factory.mktemp("reports")
    rc = gate.main(["--reports", str(reports), "--profile", "ci", "--", "-k", "x"])
    record = json.loads((reports / "verify.json").read_text())
    part = record["mufu_tables"]
    assert rc == 0 and record["verdict"] == "PASS" and not part["failed"]
    assert "measured on this GPU model" in part["why"] and RECORD in part["why"]
    assert part["certified_on"] == certification.cards() and len(part["certified_on"]) == 2
    assert f"gate: mufu model certified on: {'; '.join(part['certified_on'])}" in capsys.readouterr().out
    assert gpu_gate == [["-m", "not deep", "-k", "x"]]


def test_the_report_names_the_cards_the_gate_found(tmp_path):
    from properties.report import sections
    from properties.report.sources import Source

    data = {"verdict": "PASS", "reasons": [], "tier": "cpu+gpu", "tests": {"groups": {}},
            "mufu_tables": {"why": "MUFU tables measured on this GPU model, X", "certified_on": ["A: measured", "B"]}}
    shown = sections.verify(Source(tmp_path / "verify.json", data, False), tmp_path)
    assert shown["mufu_certified_on"] == ["A: measured", "B"] and shown["mufu_tables"].endswith("model, X")
