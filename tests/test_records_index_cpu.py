"""The results index (properties/report/records.py): it lists every committed record file of properties/results/
and nothing else, the results README's generated block is what the tool prints, each row's facts come from the
record, and a record without a description (or a description without its record) stops it naming the file."""

import json
import re

import pytest

from common.provenance import REPO_ROOT
from properties.mutants import freshness
from properties.report import records

ROW = re.compile(r"^\| `([^`]+)` \| (.*) \|$", re.M)


def _committed_records():
    """The record files of the checkout, read from the folder (a GPU runner's copy may carry a stale git index),
    the evidence record's case folder as one entry."""
    folder = REPO_ROOT / "properties" / "results"
    cases = f"{freshness.EVIDENCE.stem}-cases"
    return sorted({f"{cases}/" if p.relative_to(folder).parts[0] == cases else p.relative_to(folder).as_posix()
                   for p in folder.rglob("*") if p.is_file() and p.name != "README.md"})


def test_the_index_lists_every_committed_record_and_nothing_else():
    committed = _committed_records()
    assert "bench.json" in committed and "verdict-cases/fi_fused-tie_within_lane.json" in committed
    assert records.record_files() == committed
    listed = [name for name, _ in ROW.findall(records.index())]
    assert listed == committed


def test_the_results_readme_holds_what_the_tool_prints():
    text = records.README.read_text()
    assert records.BLOCK.read(text) == records.generated(), \
        "the results index is stale: python -m properties.report.records --update-readme"


def test_each_row_holds_the_records_own_facts(tmp_path):
    (tmp_path / "cases").mkdir()
    (tmp_path / "run.json").write_text(json.dumps({"verdict": "FAIL", "provenance": {
        "gpu": "NVIDIA H200", "commit": "0123456789abcdef0123456789abcdef01234567", "date": "2026-12-01T10:00:00Z"}}))
    (tmp_path / "cpu.json").write_text(json.dumps({"provenance": {"gpu": None, "date": "2026-12-02"}}))
    (tmp_path / "cases" / "case.json").write_text("{}")
    (tmp_path / "run.log").write_text("...\n===== 1 failed, 9 passed in 3.00s =====\n")
    what = {"run.json": "a run", "cpu.json": "a CPU run", "cases/case.json": "a case", "run.log": "its log"}
    rows = dict(ROW.findall(records.index(tmp_path, what)))
    assert rows == {"cases/case.json": "a case | - | - | - | -",
                    "cpu.json": "a CPU run | none (CPU) | - | 2026-12-02 | -",
                    "run.json": "a run | H200 | 0123456 | 2026-12-01 | FAIL",
                    "run.log": "its log | - | - | - | 1 failed, 9 passed"}


def test_the_evidence_records_case_folder_is_one_row_counting_its_files(tmp_path):
    cases = tmp_path / f"{freshness.EVIDENCE.stem}-cases"
    cases.mkdir()
    for name in ("a.json", "b.json"):
        (cases / name).write_text("{}")
    (tmp_path / "run.json").write_text("{}")
    assert records.record_files(tmp_path) == [f"{cases.name}/", "run.json"]
    rows = dict(ROW.findall(records.index(tmp_path, {f"{cases.name}/": "the cases", "run.json": "a run"})))
    assert rows[f"{cases.name}/"] == "the cases | - | - | - | 2 case files"


def test_a_record_without_a_description_or_a_description_without_its_record_is_named(tmp_path):
    (tmp_path / "new.json").write_text("{}")
    with pytest.raises(ValueError, match=r"^new\.json: a record without a description"):
        records.index(tmp_path, {})
    with pytest.raises(ValueError, match=r"^gone\.json: described in WHAT"):
        records.index(tmp_path, {"new.json": "a run", "gone.json": "removed"})


def test_update_readme_replaces_the_block_alone():
    text = f"intro\n\n{records.BLOCK.begin}\nold rows\n{records.BLOCK.end}\n\ntail\n"
    replaced = records.BLOCK.replace(text, "new rows")
    assert records.BLOCK.read(replaced) == "new rows"
    assert replaced.replace("new rows", "old rows") == text
    assert records.BLOCK.read("no markers") is None


def _gate(folder, name, depth, gpu, date, seconds, verdict="PASS"):
    environment = {"date": date, "gpu": gpu, "host": {"cores": 2}}
    (folder / name).write_text(json.dumps({"depth": depth, "gpu": "available" if gpu else "no CUDA device",
                                           "verdict": verdict, "seconds": seconds, "environment": environment}))


def test_the_tiers_table_shows_each_tiers_newest_gate_and_says_when_there_is_none(tmp_path):
    _gate(tmp_path, "verify-a.json", "default", "GPU X", "2026-01-02T00:00:00Z", 90.5)
    _gate(tmp_path, "verify-b.json", "default", "GPU X", "2026-01-01T00:00:00Z", 300.0, "FAIL")
    _gate(tmp_path, "verify-c.json", "default", None, "2026-01-01T00:00:00Z", 120.0)
    (tmp_path / "verify-old.json").write_text(json.dumps({"verdict": "PASS", "seconds": 1.0}))  # no depth: older
    rows = records.tiers_table(tmp_path).splitlines()[2:]
    assert rows == ["| default gate, GPU | `verify-a.json` | GPU X | PASS | 90.5 |",
                    "| default gate, CPU | `verify-c.json` | 2 CPU cores | PASS | 120.0 |",
                    "| deep tests, GPU | - | - | no record yet | - |",
                    "| deep tests, CPU | - | - | no record yet | - |"]


MAX_README_LINES = 400  # the results index stays a page a reader reads: the folder keeps what is current


def test_the_results_readme_stays_short():
    lines = len(records.README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"{records.README} is {lines} lines: records.superseded() names what to git rm"


def test_the_folder_keeps_the_newest_record_of_each_kind_and_card():
    assert [f"git rm {old}: {newer} is newer of its kind and card" for old, newer in records.superseded()] == []


def test_a_record_is_superseded_by_a_newer_one_of_its_kind_and_card_alone(tmp_path):
    _gate(tmp_path, "verify-old.json", "default", "GPU X", "2026-01-01T00:00:00Z", 90.0)
    _gate(tmp_path, "verify-new.json", "default", "GPU X", "2026-01-01T00:00:01Z", 90.0, "FAIL")
    _gate(tmp_path, "verify-other-card.json", "default", "GPU Y", "2025-01-01T00:00:00Z", 90.0)
    _gate(tmp_path, "verify-deep.json", "deep", "GPU X", "2025-01-01T00:00:00Z", 90.0)
    for name, gpu, date in (("bench.json", "GPU X", "2026-01-02"), ("bench-x-old.json", "GPU X", "2026-01-01"),
                            ("bench-y.json", "GPU Y", "2025-01-01")):
        (tmp_path / name).write_text(json.dumps({"provenance": {"gpu": gpu, "date": date}}))
    for name, reference in (("verdict-a.json", "model"), ("verdict-b.json", "flashinfer_fused")):
        (tmp_path / name).write_text(json.dumps({"implementation": "fi", "reference": reference,
                                                 "provenance": {"gpu": "GPU X", "date": "2026-01-01"}}))
    assert records.superseded(tmp_path) == [("bench-x-old.json", "bench.json"), ("verify-old.json", "verify-new.json")]
