"""The default and deep tests (properties/tools/depths.py): the deep marker selects exactly the listed tests and
each entry names one (every other test is a default one: the two marker expressions are complements), `make test`
and the default gate leave the deep ones out, and the README's table is the list."""

import subprocess
import sys

import pytest

from oracles.provenance import REPO_ROOT
from properties.tools import depths, gate


@pytest.fixture(scope="module")
def deep_tests():
    """The tests pytest selects with the deep tests' marker expression."""
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--co", "-n", "0", "-m",
                          gate.DEPTHS[True]], cwd=REPO_ROOT, capture_output=True, text=True).stdout
    return {line for line in out.splitlines() if line.startswith("tests/")}


def test_the_deep_marker_selects_exactly_the_listed_tests_and_each_entry_names_one(deep_tests):
    assert deep_tests and all(depths.is_deep(t) for t in deep_tests)
    for entry in depths.DEEP:
        assert any(t == entry.test or t.startswith(entry.test + "[") for t in deep_tests), f"{entry.test}: no such test"
        assert entry.catches and entry.still, entry.test


def test_an_entry_without_parameters_takes_every_parametrisation_and_nothing_else():
    entry = depths.DEEP[1].test
    assert depths.is_deep(entry) and depths.is_deep(entry + "[div_rn]")
    assert not depths.is_deep(entry + "_and_more") and not depths.is_deep(entry.replace("::", "::x_"))


def test_make_test_and_the_default_gate_leave_the_deep_tests_out():
    dry = subprocess.run(["make", "-n", "test"], cwd=REPO_ROOT, capture_output=True, text=True).stdout
    assert f'-m "{gate.DEPTHS[False]}"' in dry
    assert gate.parse([])[0].deep is False and gate.parse(["--deep"])[0].deep is True


def test_the_readme_table_is_the_list():
    assert depths.table() in (REPO_ROOT / "README.md").read_text()
