"""`make verify`: run everything this machine can run, summarise per part, fail on any mismatch.

    python -m properties.tools.gate [--deep] [--require-gpu] [--require-fresh] [--reports DIR] [--profile NAME]
                                    [--workers-per-gpu N] [-- PYTEST_ARGS...]

Depth: by default the tests not marked ``deep`` (every check that can catch a wrong kernel, oracle, model or
harness change); --deep runs the tests marked ``deep`` alone (the long sweeps, the harness's slow end-to-end
self-tests), then, on a GPU, the speed check (properties/tools/speed.py) alone on the idle card: a shape slower
than the committed bench record of this GPU model by more than its margin fails the gate; a card no record names
is reported "not run" by name, not failed. The kernel's committed evidence record (properties/mutants/freshness.py)
is read either way and reported fresh, or stale naming each changed file and the command that refreshes it; a
stale one fails the gate with VERIFY_REQUIRE_GPU=1 (a GPU runner, which can refresh it) or VERIFY_REQUIRE_FRESH=1
(or their options), and is only reported otherwise (CPU CI).

Parts: the FlashInfer oracle build (nvcc; "not run" with the reason where nvcc or the sources are missing),
then the test suite (CPU tier everywhere, GPU tier where CUDA exists and the tables hold) and, while its workers
start, on a GPU the oracles' import probes and the MUFU tables' provenance against this GPU
(oracles/mufu/recheck.py; tables that differ stop the suite, which runs again without its GPU tier), and the GPU
models the model is certified on (oracles/mufu/certification.py). While the suite
runs: "N of M tests done" at least every PROGRESS_S seconds, and each failure's test id when it is known.
Writes DIR/verify.json (verdict, the reasons for a FAIL, per-part counts, commit, date, host, GPU, package
versions) and DIR/junit.xml, each whole or not at all; the previous run's reports are removed first.
Fails on any failed test, on any skip that is not a named one (a GPU check without CUDA, the FlashInfer
build without nvcc or sources), on a selection that ran no test, on MUFU tables that differ on this GPU, and
with VERIFY_REQUIRE_GPU=1 (or --require-gpu) when no GPU was found, no GPU check passed, or any GPU check,
oracle or the FlashInfer library could not run; a test file or folder it was given that does not exist is
named. VERIFY_REQUIRE_GPU must be 1 or 0; VERIFY_IMPL's plug-in specs (checked for form before anything
runs) reach only the tests meant for plug-ins, as --verify-impl options. SIGTERM or SIGINT: pytest is ended and verify.json says
INCOMPLETE (the failures so far, the parts not finished); exit 128 + the signal's number. Unknown options,
an unknown profile (--profile, else HYPOTHESIS_PROFILE, as `make verify` passes it), a --reports that cannot
be written or a malformed VERIFY_REQUIRE_GPU or VERIFY_IMPL: one line, exit 2, nothing written.
"""

if __name__ == "__main__":  # Ctrl-C while the imports below load: one line, never a traceback
    from common.interrupts import at_start
    at_start("gate")

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from pytest import ExitCode

from common import provenance
from oracles.flashinfer_routing import build as flashinfer_build
from oracles.mufu import certification, recheck
from common.provenance import REPO_ROOT as ROOT
from common.provenance import cuda_reason
from properties.bench import speed_record
from properties.mutants import freshness
from properties.tools import depths, gpu_groups, profiles, progress
from common import args as types
from common.args import OneLineParser

PROGRESS_S = 20  # a progress line at least this often
PROGRESS_FILE = "progress.jsonl"
STOP_GRACE_S = 10  # after SIGTERM, pytest's process group gets this long before SIGKILL
INTERRUPTS = (signal.SIGTERM, signal.SIGINT)
INCOMPLETE = "INCOMPLETE"
PARTS = ("flashinfer build", "oracle probes", "mufu tables", "evidence", "tests", "speed check")
DEPTHS = {False: f"not {depths.DEEP_MARKER}", True: depths.DEEP_MARKER}  # --deep -> the marker expression pytest selects with
NOTHING_RAN_EXITS = (ExitCode.USAGE_ERROR, ExitCode.NO_TESTS_COLLECTED)
REPORTS = ("verify.json", "junit.xml")
# One thread per worker for torch's and the BLAS's pools, where the caller did not size them: the workers are the
# gate's parallelism, and a pool of a thread per core in each of them only competes with the others for the cores.
THREAD_POOL_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# Skips the gate accepts, by the start of their reason: a GPU check on a machine without CUDA (conftest.py
# marks them), the FlashInfer build where nvcc or the sources are missing, the report's screenshot where Chromium
# is absent. Any other skip fails the gate.
GPU_NOT_RUN = "GPU check not run"
CHROMIUM_NOT_RUN = "Chromium not installed"  # properties/report/screenshot.py raises it
NAMED_SKIPS = (GPU_NOT_RUN, flashinfer_build.NOT_RUN, CHROMIUM_NOT_RUN)


def named_skip(reason):
    """The name of the accepted skip whose reason ``reason`` is, or None."""
    return next((name for name in NAMED_SKIPS if reason.startswith(name + ": ")), None)


def _positive(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


SWITCH_VALUES = {"1": True, "0": False, "": False}
REQUIRE_GPU_ENV, REQUIRE_FRESH_ENV = "VERIFY_REQUIRE_GPU", "VERIFY_REQUIRE_FRESH"


def switch_env(environ, name):
    """An environment switch (VERIFY_REQUIRE_GPU, VERIFY_REQUIRE_FRESH): 1 is on, 0 or unset off; ValueError (one
    line) for anything else, which would otherwise read as off."""
    value = environ.get(name, "")
    if value not in SWITCH_VALUES:
        raise ValueError(f"{name}={value!r}: must be 1 (on) or 0 (off)")
    return SWITCH_VALUES[value]


def plugin_specs(environ):
    """The plug-in specs of VERIFY_IMPL (space-separated NAME=MODULE:ATTR or NAME=PATH.py:ATTR), each checked for
    form; ValueError (one line) naming the variable and the first malformed one."""
    from properties.engine.plugins import ENV, parse as parse_spec

    specs = environ.get(ENV, "").split()
    for spec in specs:
        try:
            parse_spec(spec)
        except ValueError as exc:
            raise ValueError(f"{ENV}: {str(exc).removeprefix('--impl ')}") from None
    return specs


def missing_paths(pytest_args):
    """The test files or folders named in ``pytest_args`` (an argument ending in .py or starting with tests/,
    before any ::) that do not exist: pytest's usage error names them only on its own stderr."""
    paths = [arg.split("::")[0] for arg in pytest_args if not arg.startswith("-")]
    return [p for p in paths if (p.endswith(".py") or p.startswith("tests")) and not (ROOT / p).exists()]


def parse(argv):
    """(options, pytest arguments) of a command line; one line and exit 2 for anything unknown."""
    argv = list(sys.argv[1:] if argv is None else argv)
    pytest_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = OneLineParser(prog="gate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deep", action="store_true",
                        help="run the deep tests (marked deep) instead of the default ones")
    parser.add_argument("--require-gpu", action="store_true", default=False)
    parser.add_argument("--require-fresh", action="store_true", default=False,
                        help="fail when the committed evidence record was made for other inputs, also without "
                             "--require-gpu (VERIFY_REQUIRE_FRESH=1)")
    parser.add_argument("--reports", type=types.output_dir, default=str(ROOT / "reports"))
    parser.add_argument("--profile", default=None,
                        help=f"Hypothesis profile (default: {profiles.ENV}, else {profiles.GATE_GPU} with a GPU, "
                        f"else {profiles.GATE_CPU})")
    parser.add_argument("--workers-per-gpu", type=_positive, default=None,
                        help="pytest-xdist workers per GPU (default: from the cores, properties/tools/gpu_groups.py)")
    args = parser.parse_args(argv)
    try:
        args.require_gpu = args.require_gpu or switch_env(os.environ, REQUIRE_GPU_ENV)
        args.require_fresh = args.require_fresh or switch_env(os.environ, REQUIRE_FRESH_ENV)
        args.plugins = plugin_specs(os.environ)
    except ValueError as exc:
        parser.error(str(exc))
    # as `make verify` passes it: --profile, else a non-empty HYPOTHESIS_PROFILE, else the machine's default
    args.profile = (args.profile or os.environ.get(profiles.ENV)
                    or (profiles.GATE_CPU if cuda_reason() else profiles.GATE_GPU))
    problem = profiles.problem(args.profile, profiles.seeded(pytest_args))
    if problem:
        parser.error(problem)
    return args, pytest_args


class Ticker:
    """Prints ``gate: <part> running, <N of M tests done>, <elapsed> s`` every PROGRESS_S seconds while a part
    runs, the counts from the progress file (properties/tools/progress.py)."""

    def __init__(self, started, progress_file=None):
        self.started, self.progress_file, self.part = started, progress_file, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(PROGRESS_S):
            print(f"gate: {self.part} running, {progress.describe(progress.read(self.progress_file))}, "
                  f"{time.monotonic() - self.started:.0f} s elapsed", flush=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class Interrupted(Exception):
    """The gate received SIGTERM or SIGINT."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def build_flashinfer(require_gpu):
    """The FlashInfer build part (every library of its build.LIBRARIES): {"ran", "failed", "why", "seconds"};
    not run where nvcc or the sources are missing (a failure under require_gpu only when no prebuilt library
    is there to run the oracle)."""
    started = time.monotonic()
    reason = flashinfer_build.unavailable()
    if reason is not None:
        have = flashinfer_build.LIBRARY.is_file()
        why = f"not run: {reason}" + ("; the prebuilt library is used" if have else "; no prebuilt library")
        return {"ran": False, "failed": require_gpu and not have, "why": why, "seconds": 0.0}
    try:
        flashinfer_build.build_all()
    except RuntimeError as exc:
        return {"ran": True, "failed": True, "why": str(exc).splitlines()[0], "seconds": time.monotonic() - started}
    return {"ran": True, "failed": False, "why": "", "seconds": time.monotonic() - started}


def certified_on():
    """The GPU models the model's MUFU tables are certified on, one line each (oracles/mufu/certification.py),
    or one line saying why that is not known."""
    try:
        return certification.cards()
    except (OSError, ValueError) as exc:
        return [f"not known: {exc}"]


def check_mufu(gpu_reason):
    """The MUFU tables part, on a GPU: the tables' GPU model against this one, on another model its
    certification record or a sample measured again (oracles/mufu/recheck.py). {"ran", "failed", "why",
    "seconds", "certified_on"}; failed: the GPU tier must not run, since the model would blame the kernel for
    this GPU's own answers. "certified_on" (certified_on()) is there on a CPU too."""
    if gpu_reason is not None:
        return {"ran": False, "failed": False, "why": f"not run: {gpu_reason}", "seconds": 0.0,
                "certified_on": certified_on()}
    started = time.monotonic()
    try:
        holds, line = recheck.check()
    except Exception as exc:  # a sample that cannot be measured is a tier that cannot be trusted, not a crash
        holds, line = False, f"MUFU tables could not be checked on this GPU: {type(exc).__name__}: {exc}"
    return {"ran": True, "failed": not holds, "why": line, "seconds": time.monotonic() - started,
            "certified_on": certified_on()}


def check_evidence(path=freshness.EVIDENCE):
    """The evidence part: {"ran", "failed", "fresh", "why", "seconds"} for the committed evidence record against
    this tree's inputs; "failed" is left to the verdict (a stale record fails only where freshness is required)."""
    started = time.monotonic()
    try:
        record = json.loads(path.read_text()) if path.is_file() else None
        fresh, line = freshness.status(record, freshness.inputs())
    except (OSError, ValueError, KeyError, TypeError) as exc:
        fresh, line = False, f"unreadable: {type(exc).__name__}: {exc}"
    why = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {line}"
    if not fresh:
        why += f"; refresh it on a GPU: {freshness.REFRESH}, then commit it with the kernel change"
    return {"ran": True, "failed": False, "fresh": fresh, "why": why, "seconds": time.monotonic() - started}


SPEED_TIMEOUT_S = 300


def check_speed(gpu_reason, scratch):
    """The speed check part (deep tier, after the tests: the card is idle): ``python -m properties.tools.speed`` in
    a process of its own. {"ran", "failed", "why", "seconds", "lines"}; a card no bench record names is not run,
    with its reason, and does not fail."""
    if gpu_reason is not None:
        return {"ran": False, "failed": False, "why": f"not run: {gpu_reason}", "seconds": 0.0, "lines": []}
    started = time.monotonic()
    out = scratch / "speed.json"
    try:
        done = subprocess.run([sys.executable, "-m", "properties.tools.speed", "--json", str(out)], cwd=ROOT,
                              capture_output=True, text=True, timeout=SPEED_TIMEOUT_S)
        outcome = json.loads(out.read_text()) if out.is_file() else None
    except (subprocess.TimeoutExpired, ValueError) as exc:
        done, outcome = None, {"status": speed_record.FAIL, "lines": [f"{type(exc).__name__}: {exc}".splitlines()[0]]}
    if outcome is None:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        outcome = {"status": speed_record.FAIL, "lines": [f"exit {done.returncode} without an outcome: {last}"]}
    status, lines = outcome["status"], outcome["lines"]
    if status == speed_record.NOT_CHECKED:
        why = f"not run: {lines[0]}"
    else:
        why = "; ".join(line for line in lines if not line.startswith("ok ")) or \
            f"every shape within the margin of {outcome.get('record')}"
    return {"ran": status != speed_record.NOT_CHECKED, "failed": status not in (speed_record.PASS,
                                                                                 speed_record.NOT_CHECKED),
            "why": why, "seconds": time.monotonic() - started, "lines": lines}


def stop(proc):
    """End ``proc`` and its process group (pytest and its xdist workers): SIGTERM, SIGKILL after STOP_GRACE_S."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(STOP_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue


def _start_tests(scratch, profile, workers, pytest_args, gpus):
    """The pytest process of the suite, its report files in ``scratch`` (those of an earlier start removed)."""
    for name in ("junit.xml", "tests.json", PROGRESS_FILE):
        (scratch / name).unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--hypothesis-profile={profile}",
           f"--junitxml={scratch / 'junit.xml'}", f"--gate-report={scratch / 'tests.json'}",
           f"--gate-progress={scratch / PROGRESS_FILE}", "-n", str(workers), "--dist", "worksteal", *pytest_args]
    env = {name: value for name, value in os.environ.items() if name != "VERIFY_IMPL"}
    threads = {name: "1" for name in THREAD_POOL_ENV if name not in env}
    return subprocess.Popen(cmd, cwd=ROOT, env={**env, **threads, gpu_groups.GPUS_ENV: str(gpus)},
                            start_new_session=True)


def run_tests(scratch, profile, workers, pytest_args, gpus=0, meanwhile=None):
    """Run the suite with its report files in ``scratch``; (pytest exit status, summary or None). With
    ``gpus`` > 1 each worker group gets one GPU (properties/tools/gpu_groups.py). Pytest runs in a process
    group of its own, ended whole when the gate is interrupted; idle workers take queued tests from busy ones
    (``--dist worksteal``), and the tests marked ``long`` are dealt one per worker (properties/tools/order.py).
    ``meanwhile`` is called while the workers start and the tests run (the gate's own checks): it returns None,
    or other pytest arguments, for which the suite is stopped and run again from the start."""
    proc = _start_tests(scratch, profile, workers, pytest_args, gpus)
    try:
        again = meanwhile() if meanwhile is not None else None
        if again is not None:
            stop(proc)
            proc = _start_tests(scratch, profile, workers, again, gpus)
        rc = proc.wait()
    except BaseException:
        stop(proc)
        raise
    report = scratch / "tests.json"
    return rc, (json.loads(report.read_text()) if report.is_file() else None)


def gpu_count():
    """CUDA devices this process sees."""
    import torch

    return torch.cuda.device_count()


def oracles_not_run():
    """On a GPU: name -> why, for each oracle or the kernel whose import or probe failed."""
    if cuda_reason() is not None:  # no import of the implementations (torch, Triton, the DSL) without CUDA
        return {}
    from properties.engine.implementations import failed_on_gpu

    return failed_on_gpu()


def plugins_status(specs):
    """name -> None (it runs) or why not, for each plug-in of ``specs`` (VERIFY_IMPL's) or an installed entry
    point (properties/engine/plugins.py); the plug-in tests check the ones that run, a refused one fails."""
    import importlib.metadata

    from properties.engine.plugins import GROUP

    if not specs and not importlib.metadata.entry_points(group=GROUP):
        return {}
    from properties.engine import implementations

    implementations.configure(specs)
    return {**{name: None for name in implementations.configured()}, **implementations.refused()}


def pytest_plugin_options(specs):
    """The pytest options handing VERIFY_IMPL's plug-ins to the tests meant for them (conftest.py's --verify-impl),
    never to the environment of every test's subprocesses."""
    return [f"--verify-impl={spec}" for spec in specs]


def _ran_nothing(rc, summary):
    """True when the selection ran no test: pytest's usage error or empty collection, or nothing passed or
    failed (every test skipped or deselected)."""
    return rc in NOTHING_RAN_EXITS if summary is None else not summary["ran"]


def verdict(rc, summary, flashinfer, oracles, require_gpu, gpu_reason=None, mufu=None, plugins=None,
            evidence=None, require_fresh=False, speed=None):
    """The reasons this run fails (empty: it passes); a selection that ran no test is the last one. A stale
    evidence record fails where freshness is required: ``require_gpu`` (a GPU runner) or ``require_fresh``."""
    reasons = []
    if (require_gpu or require_fresh) and evidence is not None and not evidence["fresh"]:
        reasons.append(f"evidence record not fresh ({'VERIFY_REQUIRE_GPU=1' if require_gpu else 'VERIFY_REQUIRE_FRESH=1'}): "
                       f"{evidence['why']}")
    if summary is None and rc not in NOTHING_RAN_EXITS:
        reasons.append(f"pytest ended with exit {rc} and wrote no report (crash)")
    if summary is not None:
        failed = sum(g["failed"] for g in summary["groups"].values())
        if failed:
            reasons.append(f"{failed} tests failed")
        if rc and not failed and summary["ran"]:
            reasons.append(f"pytest exit {rc}")
        if summary["unnamed_skips"]:
            reasons.append(f"{len(summary['unnamed_skips'])} tests skipped without a named reason: "
                           + ", ".join(s["test"] for s in summary["unnamed_skips"]))
    if flashinfer["failed"]:
        reasons.append(f"FlashInfer build: {flashinfer['why']}")
    if mufu is not None and mufu["failed"]:
        reasons.append(f"GPU tier not run: {mufu['why']}")
    if require_gpu:
        if gpu_reason is not None:
            reasons.append(f"no GPU found (VERIFY_REQUIRE_GPU=1): {gpu_reason}")
        if summary is not None:
            if summary["gpu_checks_not_run"]:
                reasons.append(f"{summary['gpu_checks_not_run']} GPU checks did not run (VERIFY_REQUIRE_GPU=1)")
            if not summary["gpu_checks_passed"]:
                reasons.append("0 GPU checks passed (VERIFY_REQUIRE_GPU=1): no GPU test ran")
        if oracles:
            reasons.append("oracles not run (VERIFY_REQUIRE_GPU=1): " + ", ".join(oracles))
    reasons += [f"implementation {name} not run: {why}" for name, why in (plugins or {}).items() if why]
    if speed is not None and speed["failed"]:
        reasons.append(f"speed check: {speed['why']}")
    if _ran_nothing(rc, summary):
        reasons.append(f"the selection ran no test (pytest exit {rc}): nothing was verified")
    return reasons


def _part_row(name, part):
    return (f"{name:20s} {'yes' if part['ran'] else 'no':>5s} {'':>7s} {'1' if part['failed'] else '0':>7s} "
            f"{'':>8s} {'':>10s} {part['seconds']:8.1f}  {part['why']}")


def table(summary, flashinfer, oracles, mufu=None, plugins=None, evidence=None, speed=None):
    head = f"{'part':20s} {'ran':>5s} {'passed':>7s} {'failed':>7s} {'skipped':>8s} {'cases':>10s} {'seconds':>8s}  why not run"
    lines = [head, "-" * len(head), _part_row("flashinfer build", flashinfer)]
    if mufu is not None:
        lines.append(_part_row("mufu tables", mufu))
    if evidence is not None:
        lines.append(_part_row("evidence", evidence))
    if speed is not None:
        lines.append(_part_row("speed check", speed))
    for name, why in oracles.items():
        lines.append(f"{'oracle ' + name:20s} {'no':>5s} {'':>7s} {'':>7s} {'':>8s} {'':>10s} {'':>8s}  not run: {why}")
    for name, why in (plugins or {}).items():
        lines.append(f"{'plugin ' + name:20s} {'no' if why else 'yes':>5s} {'':>7s} {'1' if why else '0':>7s} "
                     f"{'':>8s} {'':>10s} {'':>8s}  {'not run: ' + why if why else ''}")
    for name, g in sorted((summary or {}).get("groups", {}).items()):
        ran = "yes" if g["passed"] + g["failed"] else "no"
        why = "; ".join(f"{n} x {r}" for r, n in g["skip_reasons"].items())
        lines.append(f"{name:20s} {ran:>5s} {g['passed']:7d} {g['failed']:7d} {g['skipped']:8d} {g['cases']:10d} "
                     f"{g['seconds']:8.1f}  {why}")
    return "\n".join(lines)


def write_whole(path, text):
    """Write ``text`` to ``path`` through a temporary file in the same folder, then rename it into place."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    os.replace(partial, path)


def _interrupt(signum, frame):
    """SIGTERM or SIGINT: further ones are ignored while the gate ends pytest and writes its report."""
    for handled in INTERRUPTS:
        signal.signal(handled, signal.SIG_IGN)
    raise Interrupted(signum)


def main(argv=None):
    """Run the gate; 0 PASS, 1 FAIL, 128 + the signal's number when SIGTERM or SIGINT cut it short."""
    args, pytest_args = parse(argv)
    previous = {handled: signal.signal(handled, _interrupt) for handled in INTERRUPTS}
    try:
        return _run(args, pytest_args)
    finally:
        for handled, handler in previous.items():
            signal.signal(handled, handler)


def _run(args, pytest_args):
    reports = args.reports
    reports.mkdir(parents=True, exist_ok=True)
    for name in REPORTS + ("tests.json",):
        (reports / name).unlink(missing_ok=True)
    started = time.monotonic()
    gpu_reason = cuda_reason()
    gpus = 0 if gpu_reason else gpu_count()
    workers = "auto" if gpu_reason else gpu_groups.workers(gpus, os.cpu_count() or 1, args.workers_per_gpu)
    tier = "cpu" if gpu_reason else "cpu+gpu"
    depth = "deep" if args.deep else "default"
    print(f"gate: {depth} tests, tier {tier} ({gpu_reason or f'{gpus} GPUs'}), profile {args.profile}, "
          f"{workers} workers, require GPU {args.require_gpu}, require fresh evidence {args.require_gpu or args.require_fresh}",
          flush=True)
    parts = {}  # name -> the part's result, as each finishes
    rc, summary, interrupted, plugins = None, None, None, {}
    with tempfile.TemporaryDirectory(dir=reports, prefix=".gate-") as tmp:
        scratch = Path(tmp)
        with Ticker(started, scratch / PROGRESS_FILE) as ticker:
            try:
                ticker.part = "flashinfer build"
                parts["flashinfer build"] = build_flashinfer(args.require_gpu)
                flashinfer = parts["flashinfer build"]
                print(f"gate: flashinfer build: {'ran' if flashinfer['ran'] else 'not run'} {flashinfer['why']}",
                      flush=True)
                selection = pytest_plugin_options(args.plugins) + ["-m", DEPTHS[args.deep]] + pytest_args

                def checks():
                    """The checks that need no test result, while the tests start: the suite is run again
                    without its GPU tests when this GPU's MUFU tables differ."""
                    nonlocal plugins
                    ticker.part = "oracle probes"
                    parts["oracle probes"] = oracles_not_run()
                    plugins = plugins_status(args.plugins)
                    ticker.part = "mufu tables"
                    parts["mufu tables"] = check_mufu(gpu_reason)
                    if not gpu_reason:
                        print(f"gate: mufu tables: {parts['mufu tables']['why']}", flush=True)
                    print(f"gate: mufu model certified on: {'; '.join(parts['mufu tables']['certified_on'])}",
                          flush=True)
                    ticker.part = "evidence"
                    parts["evidence"] = check_evidence()
                    print(f"gate: evidence: {parts['evidence']['why']}", flush=True)
                    ticker.part = "tests"
                    if parts["mufu tables"]["failed"]:
                        return selection + ["-m", f"({DEPTHS[args.deep]}) and not gpu"]
                    return None

                ticker.part = "tests"
                rc, summary = run_tests(scratch, args.profile, workers, selection, gpus, meanwhile=checks)
                parts["tests"] = summary
                if args.deep:
                    ticker.part = "speed check"
                    parts["speed check"] = check_speed(gpu_reason, scratch)
                    print(f"gate: speed check: {parts['speed check']['why']}", flush=True)
            except Interrupted as exc:
                interrupted = exc
            for handled in INTERRUPTS:  # the run is over: what follows only writes its report
                signal.signal(handled, signal.SIG_IGN)
        seconds = time.monotonic() - started
        base = {"depth": depth, "tier": tier, "gpu": gpu_reason or "available", "hypothesis_profile": args.profile,
                "pytest_args": pytest_args, "workers": workers, "pytest_exit": rc, "seconds": round(seconds, 1),
                "require_gpu": args.require_gpu, "flashinfer_build": parts.get("flashinfer build"),
                "oracles_not_run": parts.get("oracle probes"), "mufu_tables": parts.get("mufu tables"),
                "plugins": plugins, "evidence": parts.get("evidence"), "require_fresh": args.require_fresh,
                "speed_check": parts.get("speed check"),
                "tests": summary, "environment": {**provenance.record(), "host": provenance.host()}}
        if interrupted is not None:
            so_far = progress.read(scratch / PROGRESS_FILE)
            reasons = [f"interrupted by {interrupted} during {ticker.part} after {seconds:.0f} s "
                       f"({progress.describe(so_far)})"]
            record = {"verdict": INCOMPLETE, "reasons": reasons, "failures_so_far": so_far["failures"],
                      "not_finished": [p for p in PARTS if p not in parts and (args.deep or p != "speed check")],
                      **base}
        else:
            reasons = verdict(rc, summary, parts["flashinfer build"], parts["oracle probes"], args.require_gpu,
                              gpu_reason, parts["mufu tables"], plugins, parts["evidence"], args.require_fresh,
                              parts.get("speed check"))
            reasons = [f"no such test file or folder: {path}" for path in missing_paths(pytest_args)] + reasons
            record = {"verdict": "FAIL" if reasons else "PASS", "reasons": reasons, **base}
        if (scratch / "junit.xml").is_file() and interrupted is None:
            shutil.move(scratch / "junit.xml", reports / "junit.xml.partial")
            os.replace(reports / "junit.xml.partial", reports / "junit.xml")
        write_whole(reports / "verify.json", json.dumps(record, indent=1) + "\n")
    if interrupted is not None:
        for test in record["failures_so_far"]:
            print(f"  failed so far: {test}")
        print(f"  not finished: {', '.join(record['not_finished'])}")
    else:
        print()
        print(table(summary, parts["flashinfer build"], parts["oracle probes"], parts["mufu tables"], plugins,
                    parts["evidence"], parts.get("speed check")))
        not_run = summary["gpu_checks_not_run"] if summary else "?"
        print(f"\n{depth} tests, tier {tier} ({gpu_reason or 'GPU present'}); {not_run} GPU checks did not run; "
              f"{seconds:.0f} s wall; reports in {reports}")
    for reason in reasons:
        print(f"  {'FAIL' if interrupted is None else INCOMPLETE}: {reason}")
    print(f"verify: {record['verdict']}", flush=True)
    if interrupted is not None:
        return 128 + interrupted.signum
    return 0 if not reasons else 1


if __name__ == "__main__":
    sys.exit(main())
