"""The default and deep tests (properties/tools/depths.py): the markers select exactly the listed tests and each
entry names one (every other test is a default one: the gate's two marker expressions are complements),
`make test` leaves out the deep tests but the self-tests, the default gate leaves out both, and the README's
tables are the lists."""

import subprocess
import sys

import pytest

from common.provenance import REPO_ROOT
from properties.tools import depths, gate

# Prints each collected test's id and markers (no -m: every test, as conftest.py marks it).
COLLECT = """
import sys, pytest
class Markers:
    def pytest_collection_finish(self, session):
        for item in session.items:
            print("ITEM", item.nodeid, *sorted({m.name for m in item.iter_markers()}))
sys.exit(pytest.main(["-p", "no:cacheprovider", "-q", "--co", "-n", "0"], plugins=[Markers()]))
"""


@pytest.fixture(scope="module")
def markers():
    """{test id: its markers} of every test pytest collects."""
    out = subprocess.run([sys.executable, "-c", COLLECT], cwd=REPO_ROOT, capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        if line.startswith("ITEM "):
            nodeid, *names = line.split()[1:]
            found[nodeid] = set(names)
    return found


def test_the_markers_select_exactly_the_listed_tests_and_each_entry_names_one(markers):
    assert len(markers) > 1000
    for nodeid, names in markers.items():
        assert (depths.DEEP_MARKER in names) == depths.is_deep(nodeid), nodeid
        assert (depths.SELF_TEST_MARKER in names) == depths.is_self_test(nodeid), nodeid
    for entry in depths.DEEP + depths.SELF_TESTS:
        assert any(entry.names(t) for t in markers), f"{entry.test}: no such test"
        assert entry.catches and entry.still, entry.test


def test_an_entry_names_its_parametrisations_or_its_files_tests_and_nothing_else():
    test = depths.Deep("tests/test_x_cpu.py::test_y", "c", "s")
    assert test.names("tests/test_x_cpu.py::test_y") and test.names("tests/test_x_cpu.py::test_y[rcp_then_mul]")
    assert not test.names("tests/test_x_cpu.py::test_y_and_more") and not test.names("tests/test_x_cpu.py::x_test_y")
    whole = depths.Deep("tests/test_x_cpu.py", "c", "s")
    assert whole.names("tests/test_x_cpu.py::test_y") and whole.names("tests/test_x_cpu.py::test_z[1]")
    assert not whole.names("tests/test_x_cpu.py_more::test_y") and not whole.names("tests/test_x_cpu_2.py::test_y")


def test_a_self_test_is_deep_for_the_gate_and_in_make_test():
    self_test = depths.SELF_TESTS[0].test + "::test_any"
    assert depths.is_deep(self_test) and depths.is_self_test(self_test)
    assert depths.is_deep(depths.DEEP[0].test) and not depths.is_self_test(depths.DEEP[0].test)
    assert not depths.is_deep("tests/test_kernel_gpu.py::test_any")


def test_make_test_keeps_the_self_tests_and_the_default_gate_leaves_every_deep_test_out():
    dry = subprocess.run(["make", "-n", "test"], cwd=REPO_ROOT, capture_output=True, text=True).stdout
    assert f'-m "{depths.MAKE_TEST}"' in dry
    assert gate.DEPTHS == {False: f"not {depths.DEEP_MARKER}", True: depths.DEEP_MARKER}
    assert gate.parse([])[0].deep is False and gate.parse(["--deep"])[0].deep is True


def test_the_readme_tables_are_the_lists():
    assert depths.table() in (REPO_ROOT / "README.md").read_text()
