"""Host time per call, for the eager figures and the launch floor: REPEATS runs of a number of calls back to back,
each timed with a synchronisation after it, and their median."""

import time

REPEATS = 5  # the host is shared: each figure is the median of this many means


def means_us(fn, calls, finish=lambda: None):
    """REPEATS means, in µs per call, of ``calls`` calls of ``fn`` back to back, ``finish()`` (a device
    synchronisation) timed after each run of them."""
    means = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        finish()
        means.append((time.perf_counter() - started) / calls * 1e6)
    return means


def median(values):
    return sorted(values)[len(values) // 2]
