"""A kill table's freshness (properties/mutants/freshness.py) and how the gate reports it: the inputs follow
the probes' imports, a change of any input names the file, and only VERIFY_REQUIRE_FRESH=1 turns a stale table
into a failure."""

import json

import pytest

from properties.mutants import freshness
from properties.tools import gate


def _table(inputs, verdict="PASS", tier="gpu"):
    return {"verdict": verdict, "tier": tier, "gpu": "NVIDIA H200", "commit": "abc", "inputs": inputs,
            "mutants": [{"killed_by": ["static"]}, {"killed_by": ["differential"]}]}


@pytest.fixture(scope="module")
def now():
    return freshness.inputs()


def test_the_inputs_are_the_kernel_the_probes_imports_and_their_data(now):
    for path in ("kernel/routing.py", "kernel/contract.py", "properties/mutants/probe.py",
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
    files = {p.relative_to(tmp_path).as_posix() for p in freshness.import_closure(root=tmp_path)}
    assert files == {"properties/__init__.py", "properties/mutants/__init__.py", "properties/mutants/runner.py",
                     "properties/mutants/probe.py", "kernel/__init__.py", "kernel/helper.py"}


def test_a_table_made_for_these_inputs_is_fresh_and_any_change_names_the_file(now):
    fresh, line = freshness.status(_table(now), now)
    assert fresh and line.startswith("fresh: 2 of 2 mutants killed")
    changed = {**now, "kernel/routing.py": "0" * 64}
    changed.pop("kernel/network.py")
    fresh, line = freshness.status(_table(changed), now)
    assert not fresh and "kernel/routing.py changed" in line and "kernel/network.py added" in line
    fresh, line = freshness.status(_table({**now, "kernel/gone.py": "0"}), now)
    assert not fresh and "kernel/gone.py removed" in line


@pytest.mark.parametrize("table, words", [(None, "no kill table"), (_table({}, verdict="FAIL"), "not PASS"),
                                          (_table({}, tier="cpu"), "not every tier")])
def test_a_missing_failed_or_partial_table_is_not_fresh(table, words, now):
    fresh, line = freshness.status(table, now)
    assert not fresh and words in line


def test_the_gate_reports_a_stale_table_and_fails_on_it_only_when_freshness_is_required(tmp_path, now):
    path = tmp_path / "kill-table.json"
    path.write_text(json.dumps(_table({**now, "kernel/routing.py": "0" * 64})))
    part = gate.check_kill_table(path)
    assert not part["fresh"] and "kernel/routing.py changed" in part["why"] and str(path) in part["why"]
    assert part["why"].endswith(f"refresh it on a GPU: {gate.REFRESH_KILL_TABLE}, then commit it")
    path.write_text(json.dumps(_table(now)))
    assert gate.check_kill_table(path)["fresh"] and "refresh" not in gate.check_kill_table(path)["why"]
    path.write_text(json.dumps(_table({**now, "kernel/routing.py": "0" * 64})))
    part = gate.check_kill_table(path)
    passing = {"groups": {}, "ran": 3, "unnamed_skips": [], "gpu_checks_not_run": 0, "gpu_checks_passed": 0}
    fi = {"ran": True, "failed": False, "why": "", "seconds": 0.0}
    assert gate.verdict(0, passing, fi, {}, False, kill_table=part) == []
    reasons = gate.verdict(0, passing, fi, {}, False, kill_table=part, require_fresh=True)
    assert len(reasons) == 1 and "kill table not fresh" in reasons[0] and "kernel/routing.py" in reasons[0]
    path.write_text("{not json")
    assert "unreadable" in gate.check_kill_table(path)["why"]


@pytest.mark.parametrize("value, required", [("", False), ("0", False), ("1", True)])
def test_verify_require_fresh_is_read_from_the_environment(monkeypatch, value, required):
    monkeypatch.setenv("VERIFY_REQUIRE_FRESH", value)
    assert gate.parse([])[0].require_fresh is required


def test_a_malformed_switch_is_refused_in_one_line(monkeypatch, capsys):
    monkeypatch.setenv("VERIFY_REQUIRE_FRESH", "yes")
    with pytest.raises(SystemExit) as exit_:
        gate.parse([])
    assert exit_.value.code == 2 and "VERIFY_REQUIRE_FRESH='yes': must be 1 (on) or 0 (off)" in capsys.readouterr().err

