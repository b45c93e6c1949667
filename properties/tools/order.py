"""The order the tests are collected in: the tests marked ``long`` first, dealt out over the parallel workers.

pytest-xdist's worksteal scheduler gives each of W workers a contiguous share of the collection, in order, the
first of ``n`` tests ``n // W``, the next the same share of what is left, and so on; an idle worker later takes
half of the queue of the worker with the most tests left, from its end. Collected first in one block, the long
tests would all fall in the first share and run one after another; dealt here one per share in turn, each worker
starts on its part of them, and the short tests behind them are what gets taken. Standard library only: the
root conftest orders the collection with it.
"""


def workers(config):
    """The worker count of the pytest-xdist run whose worker collects with ``config``, else 1 (a run without
    workers: the environment a worker's own subprocesses inherit names the outer run's count, not theirs)."""
    return getattr(config, "workerinput", {}).get("workercount", 1)


def shares(n, workers):
    """The sizes of the contiguous shares worksteal first gives ``workers`` workers of ``n`` tests."""
    sizes, left = [], n
    for i in range(workers):
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    return sizes


def dealt(items, is_long, workers=1):
    """``items`` reordered: with one worker, the long ones (``is_long(item)``) first, each group in its order;
    with several, share i of ``shares(len(items), workers)`` starts with long tests i, i + workers, ... and is
    filled up with the others in order."""
    longs = [item for item in items if is_long(item)]
    others = [item for item in items if not is_long(item)]
    if workers <= 1:
        return longs + others
    ordered, taken = [], 0
    for i, size in enumerate(shares(len(items), workers)):
        share = longs[i::workers]
        fill = max(0, size - len(share))
        ordered += share + others[taken:taken + fill]
        taken += fill
    return ordered + others[taken:]
