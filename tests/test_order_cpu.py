"""The collection order (properties/tools/order.py): the long tests dealt over the shares pytest-xdist's
worksteal scheduler gives its workers, checked against the scheduler itself."""

import pytest
from xdist.scheduler.worksteal import WorkStealingScheduling

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
                                               (10, (0, 9), 1)])
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
