"""The libraries the pages need beyond the harness's own (a GPU runner's image may lack them)."""

import importlib.util

REQUIRED = ("matplotlib", "jinja2")


def missing():
    """The libraries of REQUIRED this Python lacks, in order."""
    return [name for name in REQUIRED if importlib.util.find_spec(name) is None]


def not_written(what):
    """The one line a command prints when it cannot write ``what`` for want of them, or None when it can."""
    lacking = missing()
    return f"{what} not written: {' and '.join(lacking)} missing" if lacking else None
