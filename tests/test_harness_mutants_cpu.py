"""The harness mutant catalog (properties/mutants/harness.py) in CI: every edit still applies exactly once and
every data change changes what it declares; the committed kill table (properties/results/harness-mutants.json,
from a full ``make harness-mutants``) covers the catalog as it is defined now, every mutant killed by an
assertion of its intended test; the issue's four survivors are run live through the same path; and the
attribution tells an assertion of the test from anything else raised."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from properties.engine.casefile import REPO_ROOT
from properties.mutants import harness, harness_run
from properties.mutants.attribution import ENV

DATA_MUTANTS = [m for m in harness.CATALOG if m.data is not None]


def test_every_source_edit_applies_exactly_once():
    harness.check_catalog(REPO_ROOT)


@pytest.mark.parametrize("mutant", DATA_MUTANTS, ids=lambda m: m.name)
def test_every_data_change_changes_what_it_declares(tmp_path, mutant):
    shutil.copytree(REPO_ROOT / harness.REGRESSION, tmp_path / harness.REGRESSION)
    harness.apply(mutant, tmp_path)


def test_the_replayed_killer_names_the_generator_of_the_changed_file():
    assert harness._first_metadata_file(REPO_ROOT).name.rsplit("-", 1)[0] == harness.FIRST_GENERATOR


def test_the_committed_kill_table_covers_the_catalog_with_every_mutant_killed():
    record = json.loads(harness_run.RESULTS.read_text())
    assert record["verdict"] == "PASS" and record["real"]["verdict"] == "passed"
    rows = {row["mutant"]: row for row in record["mutants"]}
    assert sorted(rows) == sorted(m.name for m in harness.CATALOG), "run `make harness-mutants` and commit"
    stale = [m.name for m in harness.CATALOG if rows[m.name]["digest"] != harness_run.digest(m)]
    assert not stale, f"definitions changed since the table was made: {stale}; run `make harness-mutants`"
    assert all(row["verdict"] == "killed" for row in rows.values())


def test_the_issues_four_survivors_are_killed_live():
    record = harness_run.run(harness.ISSUE_SURVIVORS, out=None, log=lambda line: None)
    assert record["real"]["verdict"] == "passed", record["real"]
    verdicts = {row["mutant"]: row["verdict"] for row in record["mutants"]}
    assert verdicts == {name: "killed" for name in harness.ISSUE_SURVIVORS}, record["failures"]


_TESTS = '''
import pytest


def _helper():
    raise ValueError("from the code under test")


def test_asserts():
    assert 1 == 2


def test_raises_elsewhere():
    _helper()


def test_did_not_raise():
    with pytest.raises(KeyError):
        pass


def test_passes():
    pass
'''


def test_attribution_tells_an_assertion_from_a_raise(tmp_path):
    (tmp_path / "test_kinds.py").write_text(textwrap.dedent(_TESTS))
    out = tmp_path / "attribution.json"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), ENV: str(out)}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                    "properties.mutants.attribution", "test_kinds.py"], cwd=tmp_path, env=env, capture_output=True)
    tests = json.loads(out.read_text())["tests"]
    outcomes = {nodeid.split("::")[1]: entry["outcome"] for nodeid, entry in tests.items()}
    assert outcomes == {"test_asserts": "assertion", "test_raises_elsewhere": "raised",
                        "test_did_not_raise": "assertion", "test_passes": "passed"}
    data = {"tests": tests, "collection_errors": []}
    assert harness_run.verdict(data, ["test_kinds.py::test_raises_elsewhere"])[0] == "raised"
    assert harness_run.verdict(data, ["test_kinds.py::test_passes", "test_kinds.py::test_asserts"])[0] == "killed"
    assert harness_run.verdict(data, ["test_kinds.py::test_passes"])[0] == "survived"
    assert harness_run.verdict(data, ["test_kinds.py::test_missing"])[0] == "raised"
