"""The gate's progress file: what the controlling pytest process knows while the suite runs.

JSON lines, appended by the controlling process alone (under pytest-xdist the conftest hooks also run in
every worker, whose counts are partial: a worker never writes): ``{"done": N, "collected": M}`` when
collection ends and after every test, ``{"failed": TEST}`` the moment a test fails (its node id, with the
phase when it is not the call). The gate's ticker shows the last count; a gate cut short reports the
failures so far from it.
"""

import json


def is_worker(config):
    """True in a pytest-xdist worker process (it has ``workeroutput``), False in the controlling process."""
    return hasattr(config, "workeroutput")


class Writer:
    """Appends the controller's counts and failures to ``path``."""

    def __init__(self, path):
        self.path, self.done, self.collected = path, 0, None

    @classmethod
    def for_config(cls, config, path):
        """A Writer to ``path`` in the controlling process; None in a worker or when ``path`` is None."""
        return None if path is None or is_worker(config) else cls(path)

    def _append(self, entry):
        with open(self.path, "a") as f:
            f.write(json.dumps(entry) + "\n")

    def _count(self):
        self._append({"done": self.done, "collected": self.collected})

    def set_collected(self, n):
        self.collected = n
        self._count()

    def test_done(self):
        self.done += 1
        self._count()

    def failed(self, nodeid, when):
        """Record the failure of ``nodeid`` in phase ``when``; returns how it is named."""
        test = nodeid if when == "call" else f"{nodeid} ({when})"
        self._append({"failed": test})
        return test


def read(path):
    """{"done", "collected" (None until known), "failures": [node ids]} of a progress file; zeros when it is
    missing. A last line cut short by a concurrent write is ignored."""
    state = {"done": 0, "collected": None, "failures": []}
    try:
        lines = open(path).read().splitlines()
    except (OSError, TypeError):
        return state
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if "failed" in entry:
            state["failures"].append(entry["failed"])
        else:
            state.update(done=entry["done"], collected=entry["collected"])
    return state


def describe(state):
    """``N of M tests done`` (``N tests done`` before collection has finished)."""
    of = f" of {state['collected']}" if state["collected"] is not None else ""
    return f"{state['done']}{of} tests done"
