"""The collection order (properties/tools/order.py): the long tests dealt over the shares pytest-xdist's
worksteal scheduler gives its workers, checked against the scheduler itself."""

import os
import subprocess
import sys

import pytest
from xdist.scheduler.worksteal import WorkStealingScheduling

from common.provenance import REPO_ROOT
from properties.tools import order


class _Config:
    """What the scheduler reads of pytest's config: the workers, as ``-n N`` gives them (``--tx N*popen``)."""

    def __init__(self, workers):
        self.workers = workers

    def getvalue(self, name):
        assert name == "tx", name
        return [f"{self.workers}*popen"]


class _Node:
    """A worker that records the tests it is sent first."""

    shutting_down = False

    def __init__(self, number):
        self.sent = []
        self.gateway = type("Gateway", (), {"id": f"gw{number}"})()

    def send_runtest_some(self, indices):
        self.sent += indices

    def shutdown(self):
        """Sent to a worker with fewer than two tests when there is nothing to take: it runs what it has."""


def first_shares(collection, workers):
    """The tests worksteal sends each worker first, by name."""
    scheduler = WorkStealingScheduling(_Config(workers))
    nodes = [_Node(i) for i in range(workers)]
    for node in nodes:
        scheduler.add_node(node)
    for node in nodes:
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    return [[collection[i] for i in node.sent] for node in nodes]


@pytest.mark.parametrize("n, workers", [(20, 3), (1771, 14), (7, 7), (5, 8)])
def test_the_shares_are_the_schedulers(n, workers):
    assert [len(share) for share in first_shares([f"t{i}" for i in range(n)], workers)] == order.shares(n, workers)


@pytest.mark.parametrize("n, longs, workers", [(20, (3, 7, 15, 19), 3), (1771, tuple(range(900, 949)), 14),
                                               (10, (0, 9), 1), (11, (0, 1, 2, 3, 4), 14), (3, (0, 1, 2), 14)])
def test_each_worker_starts_on_its_part_of_the_long_tests(n, longs, workers):
    collection = [f"{'long' if i in longs else 'short'}{i}" for i in range(n)]
    ordered = order.dealt(collection, lambda name: name.startswith("long"), workers)
    assert sorted(ordered) == sorted(collection)
    assert [name for name in ordered if name.startswith("short")] == [c for c in collection if c.startswith("short")]
    if workers == 1:
        assert ordered[:len(longs)] == [f"long{i}" for i in longs]
        return
    shares = first_shares(ordered, workers)
    counts = [sum(name.startswith("long") for name in share) for share in shares]
    assert max(counts) - min(counts) <= 1 and sum(counts) == len(longs)
    assert all(share[:count] == [n for n in share if n.startswith("long")] for share, count in zip(shares, counts))


def test_a_pytest_run_inside_a_worker_orders_by_its_own_worker_count(tmp_path):
    """A test's own pytest run (the gate's end-to-end tests) inherits the outer worker's environment, which names
    the outer run's worker count; its collection is ordered as a run of its own: the long tests first."""
    env = {**os.environ, "PYTEST_XDIST_WORKER": "gw3", "PYTEST_XDIST_WORKER_COUNT": "14"}
    listed = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                             "tests/test_fpenv.py", "tests/test_mufu_data.py", "tests/test_casefile_strict_cpu.py"],
                            capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=120)
    ids = [line for line in listed.stdout.splitlines() if "::" in line]
    assert listed.returncode == 0 and ids[:2] == [
        "tests/test_mufu_data.py::test_encoding_round_trips_and_rejects_a_corrupted_table",
        "tests/test_casefile_strict_cpu.py::test_every_committed_case_file_is_read_strictly_and_written_back_byte_for_"
        "byte"], listed.stdout[-2000:] + listed.stderr[-2000:]
