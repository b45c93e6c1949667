"""The evidence record's freshness (properties/mutants/freshness.py) and how the gate reports it: the inputs
follow the run's and the probes' imports, a change of any input names the file, and a stale record fails a GPU
runner's gate (VERIFY_REQUIRE_GPU=1) or VERIFY_REQUIRE_FRESH=1's, while CPU CI only reports it."""

import json

import pytest

from properties.mutants import freshness
from properties.tools import gate


def _record(inputs, verdict="PASS", tier="gpu", complete=True, kind=freshness.RECORD_KIND):
    return {"kind": kind, "verdict": verdict, "tier": tier, "complete": complete, "inputs": inputs,
            "provenance": {"gpu": "NVIDIA H100", "commit": "abc"}, "refresh": {"seconds": 120.0},
            "score": {"total": {"score": "2/2", "equivalent": 1}}}


@pytest.fixture(scope="module")
def now():
    return freshness.inputs()


def test_the_inputs_are_the_kernel_the_probes_imports_and_their_data(now):
    for path in ("kernel/routing.py", "kernel/contract.py", "properties/mutants/probe.py",
                 "properties/mutants/generated.py", "properties/mutants/prefilter.py", "properties/mutants/refresh.py",
                 "properties/codegen/checks.py", "properties/contract/sweep.py", "oracles/numpy_model/routing.py",
                 "properties/engine/case.schema.json"):
        assert path in now, path
    assert any(p.startswith("corpora/mutants/") for p in now) and any(p.startswith("oracles/mufu/data/") for p in now)
    for outside in ("properties/tools/gate.py", "properties/report/page.py", "README.md", "tests/conftest.py"):
        assert outside not in now, outside


def test_a_lazy_or_relative_import_is_followed(tmp_path):
    (tmp_path / "properties" / "mutants").mkdir(parents=True)
    (tmp_path / "kernel").mkdir()
    for init in ("properties/__init__.py", "properties/mutants/__init__.py", "kernel/__init__.py"):
        (tmp_path / init).write_text("")
    (tmp_path / "properties/mutants/runner.py").write_text("def f():\n    from . import probe\n")
    (tmp_path / "properties/mutants/probe.py").write_text("import json\nfrom kernel import helper\n")
    (tmp_path / "kernel/helper.py").write_text("")
    files = {p.relative_to(tmp_path).as_posix() for p in freshness.import_closure(("properties.mutants.runner",), root=tmp_path)}
    assert files == {"properties/__init__.py", "properties/mutants/__init__.py", "properties/mutants/runner.py",
                     "properties/mutants/probe.py", "kernel/__init__.py", "kernel/helper.py"}


def test_a_record_made_for_these_inputs_is_fresh_and_any_change_names_the_file(now):
    fresh, line = freshness.status(_record(now), now)
    assert fresh and line.startswith("fresh: 2/2 non-equivalent mutants detected") and "refreshed in 120.0 s" in line
    changed = {**now, "kernel/routing.py": "0" * 64}
    changed.pop("kernel/network.py")
    fresh, line = freshness.status(_record(changed), now)
    assert not fresh and "kernel/routing.py changed" in line and "kernel/network.py added" in line
    fresh, line = freshness.status(_record({**now, "kernel/gone.py": "0"}), now)
    assert not fresh and "kernel/gone.py removed" in line


@pytest.mark.parametrize("record, words", [
    (None, "no evidence record"), (_record({}, verdict="FAIL"), "not PASS"), (_record({}, tier="cpu"), "not every tier"),
    (_record({}, complete=False), "not complete"), (_record({}, kind="kill-table"), "not 'mutants-generated'")])
def test_a_missing_failed_or_partial_record_is_not_fresh(record, words, now):
    fresh, line = freshness.status(record, now)
    assert not fresh and words in line


PASSING = {"groups": {}, "ran": 3, "unnamed_skips": [], "gpu_checks_not_run": 0, "gpu_checks_passed": 5}
BUILT = {"ran": True, "failed": False, "why": "", "seconds": 0.0}


def test_the_gate_reports_a_stale_record_naming_the_changed_files_and_the_refresh_command(tmp_path, now):
    path = tmp_path / "evidence.json"
    path.write_text(json.dumps(_record({**now, "kernel/routing.py": "0" * 64})))
    part = gate.check_evidence(path)
    assert not part["fresh"] and "kernel/routing.py changed" in part["why"] and str(path) in part["why"]
    assert part["why"].endswith(f"refresh it on a GPU: {freshness.REFRESH}, then commit it with the kernel change")
    path.write_text(json.dumps(_record(now)))
    assert gate.check_evidence(path)["fresh"] and "refresh" not in gate.check_evidence(path)["why"].split("fresh:")[0]
    path.write_text("{not json")
    assert "unreadable" in gate.check_evidence(path)["why"]


def test_a_kernel_changed_without_a_refresh_fails_the_gpu_runners_gate_and_is_only_reported_on_cpu_ci(tmp_path, now):
    """The tree's kernel differs from the one the record was made for (kernel/routing.py edited, no refresh): the
    gate's verdict with VERIFY_REQUIRE_GPU=1 (a GPU runner, its GPU present and every GPU check passed) fails on it,
    naming the file and the refresh; CPU CI (neither switch) passes with the same record."""
    path = tmp_path / "evidence.json"
    path.write_text(json.dumps(_record({**now, "kernel/routing.py": "0" * 64})))
    part = gate.check_evidence(path)
    reasons = gate.verdict(0, PASSING, BUILT, {}, True, None, evidence=part)
    assert len(reasons) == 1 and reasons[0].startswith("evidence record not fresh (VERIFY_REQUIRE_GPU=1)")
    assert "kernel/routing.py changed" in reasons[0] and freshness.REFRESH in reasons[0]
    assert gate.verdict(0, PASSING, BUILT, {}, False, evidence=part) == []
    reasons = gate.verdict(0, PASSING, BUILT, {}, False, evidence=part, require_fresh=True)
    assert len(reasons) == 1 and "VERIFY_REQUIRE_FRESH=1" in reasons[0]
    path.write_text(json.dumps(_record(now)))
    assert gate.verdict(0, PASSING, BUILT, {}, True, None, evidence=gate.check_evidence(path)) == []


@pytest.mark.parametrize("value, required", [("", False), ("0", False), ("1", True)])
def test_verify_require_fresh_is_read_from_the_environment(monkeypatch, value, required):
    monkeypatch.setenv("VERIFY_REQUIRE_FRESH", value)
    assert gate.parse([])[0].require_fresh is required


def test_a_malformed_switch_is_refused_in_one_line(monkeypatch, capsys):
    monkeypatch.setenv("VERIFY_REQUIRE_FRESH", "yes")
    with pytest.raises(SystemExit) as exit_:
        gate.parse([])
    assert exit_.value.code == 2 and "VERIFY_REQUIRE_FRESH='yes': must be 1 (on) or 0 (off)" in capsys.readouterr().err

