"""`make verify`: run everything this machine can run, summarise per part, fail on any mismatch.

    python -m properties.tools.gate [--require-gpu] [--reports DIR] [--profile NAME] [-- PYTEST_ARGS...]

Parts: the FlashInfer oracle build (nvcc; "not run" with the reason where nvcc or the sources are missing),
the test suite (CPU tier everywhere, GPU tier where CUDA exists), and on a GPU the oracles' import probes.
Writes DIR/verify.json (verdict, the reasons for a FAIL, per-part counts, commit, date, host, GPU, package
versions) and DIR/junit.xml, each whole or not at all; the previous run's reports are removed first.
Fails on any failed test, on any skip that is not a named one (a GPU check without CUDA, the FlashInfer
build without nvcc or sources), and with VERIFY_REQUIRE_GPU=1 (or --require-gpu) when any GPU check, oracle
or the FlashInfer library could not run. Unknown options or profiles: one line, exit 2, nothing written.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from oracles import provenance
from oracles.flashinfer_routing import build as flashinfer_build
from oracles.provenance import REPO_ROOT as ROOT
from oracles.provenance import cuda_reason
from properties.tools import gpu_groups, profiles
from properties.tools.args import OneLineParser

PROGRESS_S = 20  # a progress line at least this often
REPORTS = ("verify.json", "junit.xml")
PACKAGES = ("numpy", "torch", "triton", "nvidia-cutlass-dsl", "apache-tvm-ffi", "flashinfer-python", "hypothesis",
            "pytest", "pytest-xdist", "jsonschema")
# Skips the gate accepts, by the start of their reason: a GPU check on a machine without CUDA (conftest.py
# marks them), the FlashInfer build where nvcc or the sources are missing. Any other skip fails the gate.
GPU_NOT_RUN = "GPU check not run"
NAMED_SKIPS = (GPU_NOT_RUN, flashinfer_build.NOT_RUN)


def named_skip(reason):
    """The name of the accepted skip whose reason ``reason`` is, or None."""
    return next((name for name in NAMED_SKIPS if reason.startswith(name + ": ")), None)


def parse(argv):
    """(options, pytest arguments) of a command line; one line and exit 2 for anything unknown."""
    argv = list(sys.argv[1:] if argv is None else argv)
    pytest_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = OneLineParser(prog="gate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--require-gpu", action="store_true", default=os.environ.get("VERIFY_REQUIRE_GPU") == "1")
    parser.add_argument("--reports", type=Path, default=ROOT / "reports")
    parser.add_argument("--profile", default=None, help="Hypothesis profile (default: gpu with a GPU, else ci)")
    args = parser.parse_args(argv)
    args.profile = args.profile or ("ci" if cuda_reason() else "gpu")
    problem = profiles.problem(args.profile, profiles.seeded(pytest_args))
    if problem:
        parser.error(problem)
    return args, pytest_args


class Ticker:
    """Prints ``gate: <part> running, <tests done>, <elapsed> s`` every PROGRESS_S seconds while a part runs."""

    def __init__(self, started, progress_file=None):
        self.started, self.progress_file, self.part = started, progress_file, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _done(self):
        try:
            return f"{int(Path(self.progress_file).read_text() or 0)} tests done, "
        except (OSError, ValueError, TypeError):
            return "0 tests done, "

    def _run(self):
        while not self._stop.wait(PROGRESS_S):
            print(f"gate: {self.part} running, {self._done()}{time.monotonic() - self.started:.0f} s elapsed",
                  flush=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


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


def run_tests(scratch, profile, workers, pytest_args, gpus=0):
    """Run the suite with its report files in ``scratch``; (pytest exit status, summary or None). With
    ``gpus`` > 1 each worker group gets one GPU (properties/tools/gpu_groups.py)."""
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--hypothesis-profile={profile}",
           f"--junitxml={scratch / 'junit.xml'}", f"--gate-report={scratch / 'tests.json'}",
           f"--gate-progress={scratch / 'progress'}", "-n", str(workers), *pytest_args]
    rc = subprocess.call(cmd, cwd=ROOT, env={**os.environ, gpu_groups.GPUS_ENV: str(gpus)})
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


def plugins_status():
    """name -> None (it runs) or why not, for each plug-in of VERIFY_IMPL or an installed entry point
    (properties/engine/plugins.py); the differential tests check the ones that run, a refused one fails."""
    import importlib.metadata

    from properties.engine.plugins import ENV, GROUP

    if not os.environ.get(ENV, "").split() and not importlib.metadata.entry_points(group=GROUP):
        return {}
    from properties.engine import implementations

    return {**{name: None for name in implementations.configured()}, **implementations.refused()}


def verdict(rc, summary, flashinfer, oracles, require_gpu, plugins=None):
    """The reasons this run fails (empty: it passes)."""
    if summary is None:
        return [f"pytest ended with exit {rc} and wrote no report (usage error or crash)"]
    reasons = []
    failed = sum(g["failed"] for g in summary["groups"].values())
    if failed:
        reasons.append(f"{failed} tests failed")
    if rc and not failed:
        reasons.append(f"pytest exit {rc}")
    if summary["unnamed_skips"]:
        reasons.append(f"{len(summary['unnamed_skips'])} tests skipped without a named reason: "
                       + ", ".join(s["test"] for s in summary["unnamed_skips"]))
    if flashinfer["failed"]:
        reasons.append(f"FlashInfer build: {flashinfer['why']}")
    if require_gpu:
        if summary["gpu_checks_not_run"]:
            reasons.append(f"{summary['gpu_checks_not_run']} GPU checks did not run (VERIFY_REQUIRE_GPU=1)")
        if oracles:
            reasons.append("oracles not run (VERIFY_REQUIRE_GPU=1): " + ", ".join(oracles))
    reasons += [f"implementation {name} not run: {why}" for name, why in (plugins or {}).items() if why]
    return reasons


def table(summary, flashinfer, oracles, plugins=None):
    head = f"{'part':20s} {'ran':>5s} {'passed':>7s} {'failed':>7s} {'skipped':>8s} {'cases':>10s} {'seconds':>8s}  why not run"
    lines = [head, "-" * len(head),
             f"{'flashinfer build':20s} {'yes' if flashinfer['ran'] else 'no':>5s} {'':>7s} "
             f"{'1' if flashinfer['failed'] else '0':>7s} {'':>8s} {'':>10s} {flashinfer['seconds']:8.1f}  "
             f"{flashinfer['why']}"]
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


def main(argv=None):
    args, pytest_args = parse(argv)
    reports = args.reports
    reports.mkdir(parents=True, exist_ok=True)
    for name in REPORTS + ("tests.json",):
        (reports / name).unlink(missing_ok=True)
    started = time.monotonic()
    gpu_reason = cuda_reason()
    gpus = 0 if gpu_reason else gpu_count()
    workers = "auto" if gpu_reason else gpu_groups.workers(gpus)
    print(f"gate: tier {'cpu' if gpu_reason else 'cpu+gpu'} ({gpu_reason or 'GPU present'}), profile "
          f"{args.profile}, require GPU {args.require_gpu}", flush=True)
    with tempfile.TemporaryDirectory(dir=reports, prefix=".gate-") as tmp:
        scratch = Path(tmp)
        with Ticker(started, scratch / "progress") as ticker:
            ticker.part = "flashinfer build"
            flashinfer = build_flashinfer(args.require_gpu)
            print(f"gate: flashinfer build: {'ran' if flashinfer['ran'] else 'not run'} {flashinfer['why']}",
                  flush=True)
            ticker.part = "oracle probes"
            oracles = oracles_not_run()
            plugins = plugins_status()
            ticker.part = "tests"
            rc, summary = run_tests(scratch, args.profile, workers, pytest_args, gpus)
        seconds = time.monotonic() - started
        reasons = verdict(rc, summary, flashinfer, oracles, args.require_gpu, plugins)
        record = {"verdict": "FAIL" if reasons else "PASS", "reasons": reasons,
                  "tier": "cpu" if gpu_reason else "cpu+gpu", "gpu": gpu_reason or "available",
                  "hypothesis_profile": args.profile, "pytest_args": pytest_args, "pytest_exit": rc,
                  "seconds": round(seconds, 1), "require_gpu": args.require_gpu, "flashinfer_build": flashinfer,
                  "oracles_not_run": oracles, "plugins": plugins, "tests": summary,
                  "environment": {**provenance.record(PACKAGES), "host": provenance.host()}}
        if (scratch / "junit.xml").is_file():
            shutil.move(scratch / "junit.xml", reports / "junit.xml.partial")
            os.replace(reports / "junit.xml.partial", reports / "junit.xml")
        write_whole(reports / "verify.json", json.dumps(record, indent=1) + "\n")
    print()
    print(table(summary, flashinfer, oracles, plugins))
    not_run = summary["gpu_checks_not_run"] if summary else "?"
    print(f"\ntier: {record['tier']} ({gpu_reason or 'GPU present'}); {not_run} GPU checks did not run; "
          f"{seconds:.0f} s; reports in {reports}")
    for reason in reasons:
        print(f"  FAIL: {reason}")
    print(f"verify: {record['verdict']}")
    return 0 if not reasons else 1


if __name__ == "__main__":
    sys.exit(main())
