"""SIGINT and SIGTERM for the long command lines: they end the command within seconds with one line and exit
128 + the signal's number (130, 143), never a KeyboardInterrupt traceback; a loop that keeps a summary defers
them to its next step, so that the summary it writes is whole and resumable. A command whose work runs in child
processes (the mutant probes, the harness mutants' copies) ends them first: a thread waiting on one would
otherwise hold the command until the child finished."""

import concurrent.futures
import os
import signal
import sys
import threading
from pathlib import Path

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Set by a signal that ends the command, before its children are ended: a ThreadPool thread whose child that ends
# would otherwise start the next queued work before the pool is shut down.
_ending = threading.Event()
# How many Interrupts are entered: while one is, a signal raises Interrupted, so a bare KeyboardInterrupt is the
# raise of the code that was running, not Ctrl-C.
_entered = []


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived before ``defer()``; a KeyboardInterrupt, so that every library that stops at
    Ctrl-C (Hypothesis, subprocess) stops at either, and none takes it for an error of the code it interrupts."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum, self.name = signum, signal.Signals(signum).name

    @property
    def exit_status(self):
        return 128 + self.signum


class Interrupts:
    """While entered (from the main thread): SIGINT or SIGTERM raises Interrupted, or, once ``defer()`` was
    called, only records itself (``requested``, ``name``, ``exit_status``) for the loop to stop at its next
    step."""

    def __init__(self):
        self.signum, self._defer, self._previous = None, False, {}

    def _handle(self, signum, frame):
        self.signum = signum
        if not self._defer:
            _ending.set()
            end_children()
            raise Interrupted(signum)

    def __enter__(self):
        _ending.clear()
        _entered.append(self)
        self._previous = {sig: signal.signal(sig, self._handle) for sig in SIGNALS}
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        _entered.remove(self)
        _ending.clear()

    def defer(self):
        """From now on a signal only sets ``requested``: the loop that called this stops at its next step."""
        self._defer = True

    @property
    def requested(self):
        return self.signum is not None

    @property
    def name(self):
        return signal.Signals(self.signum).name if self.requested else None

    @property
    def exit_status(self):
        return 128 + self.signum if self.requested else None


def raised_by_the_code(exc):
    """Whether BaseException ``exc``, raised out of code the command called (a plug-in), is that code's own
    doing (``sys.exit``, a ``raise KeyboardInterrupt``, any error) rather than a signal ending the command: a
    signal is Interrupted while Interrupts is entered; outside, a KeyboardInterrupt may be Ctrl-C, so it is
    not claimed."""
    if isinstance(exc, Interrupted):
        return False
    return not isinstance(exc, KeyboardInterrupt) or bool(_entered)


def children(pid=None):
    """The process ids whose parent is ``pid`` (default: this process), read from /proc."""
    pid = os.getpid() if pid is None else pid
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # gone meanwhile
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def end_children():
    """SIGTERM to this process's children and theirs (a probe's compiler, a copy's pytest workers)."""
    for child in children():
        for grandchild in children(child):
            _terminate(grandchild)
        _terminate(child)


def _terminate(pid):
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass


def _unless_ending(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, unless a signal is ending the command: then the work never starts."""
    if _ending.is_set():
        raise concurrent.futures.CancelledError("not started: the command was interrupted")
    return fn(*args, **kwargs)


class ThreadPool(concurrent.futures.ThreadPoolExecutor):
    """A thread pool that, left by an exception (an interrupt), cancels the work not started and ends the child
    processes of the work running before it waits, so the command ends in seconds; else it waits as usual. Work
    still queued when a signal arrives never starts, even where the running work ends first (its child ended by
    the signal) and a thread is free before the pool is left."""

    def submit(self, fn, /, *args, **kwargs):
        return super().submit(_unless_ending, fn, *args, **kwargs)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.shutdown(wait=False, cancel_futures=True)
            end_children()
        return super().__exit__(exc_type, exc, tb)


def at_start(prog):
    """For a command's module run as ``__main__``, before its imports: SIGINT or SIGTERM until ``Interrupts``
    takes over (while torch and the rest load) ends the process at once with one line and exit 128 + the
    signal's number; nothing has run, so nothing is lost, and no library's ``except`` can swallow it."""
    def end(signum, frame):
        print(f"{prog}: INTERRUPTED by {signal.Signals(signum).name} while starting: nothing done "
              f"(exit {128 + signum})", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(128 + signum)
    for sig in SIGNALS:
        signal.signal(sig, end)


def run(prog, main, argv=None):
    """``main(argv)`` with SIGINT and SIGTERM ending it in one line on stderr and exit 128 + the signal's
    number; what ``main`` had not yet written whole stays unwritten."""
    with Interrupts():
        try:
            return main(argv)
        except Interrupted as exc:
            print(f"{prog}: INTERRUPTED by {exc.name} (exit {exc.exit_status})", file=sys.stderr)
            return exc.exit_status
