"""`make verify`: run everything this machine can run, summarise per oracle, fail on any mismatch.

    python -m properties.tools.gate [--require-gpu] [--reports DIR] [--profile NAME]

CPU tier everywhere (model against recorded hardware truth, corpus replay, static codegen checks of the
kernel and the Triton oracle, the FlashInfer oracle build); GPU tier where a CUDA device exists (every
differential property live, kernel contract, graphs, PDL). Writes DIR/verify.json, DIR/junit.xml and
prints a table. VERIFY_REQUIRE_GPU=1 (or --require-gpu) also fails when a GPU check could not run.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from oracles.provenance import REPO_ROOT as ROOT
from oracles.provenance import cuda_reason

def _run_tests(reports, profile, workers):
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--hypothesis-profile={profile}",
           f"--junitxml={reports / 'junit.xml'}", f"--gate-report={reports / 'tests.json'}", "-n", str(workers)]
    started = time.perf_counter()
    rc = subprocess.call(cmd, cwd=ROOT)
    return rc, time.perf_counter() - started


def _table(groups):
    head = f"{'part':20s} {'ran':>5s} {'passed':>7s} {'failed':>7s} {'skipped':>8s} {'cases':>10s} {'seconds':>8s}  why not run"
    lines = [head, "-" * len(head)]
    for name, g in sorted(groups.items()):
        ran = "yes" if g["passed"] + g["failed"] else "no"
        why = "; ".join(f"{n} x {r}" for r, n in g["skip_reasons"].items())
        lines.append(f"{name:20s} {ran:>5s} {g['passed']:7d} {g['failed']:7d} {g['skipped']:8d} {g['cases']:10d} "
                     f"{g['seconds']:8.1f}  {why}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--require-gpu", action="store_true", default=os.environ.get("VERIFY_REQUIRE_GPU") == "1")
    parser.add_argument("--reports", default=str(ROOT / "reports"))
    parser.add_argument("--profile", default=None, help="Hypothesis profile (default: gpu with a GPU, else ci)")
    args = parser.parse_args(argv)
    reports = Path(args.reports)
    reports.mkdir(parents=True, exist_ok=True)
    gpu_reason = cuda_reason()
    profile = args.profile or ("ci" if gpu_reason else "gpu")
    workers = "auto" if gpu_reason else 4
    rc, seconds = _run_tests(reports, profile, workers)
    summary = json.loads((reports / "tests.json").read_text())
    failed = sum(g["failed"] for g in summary["groups"].values())
    not_run = summary["gpu_checks_not_run"]
    verdict = "FAIL" if rc or failed else "PASS"
    if args.require_gpu and not_run:
        verdict = "FAIL"
    record = {"verdict": verdict, "tier": "cpu" if gpu_reason else "cpu+gpu", "gpu": gpu_reason or "available",
              "hypothesis_profile": profile, "pytest_exit": rc, "seconds": round(seconds, 1),
              "require_gpu": args.require_gpu, "gpu_checks_not_run": not_run, "groups": summary["groups"]}
    (reports / "verify.json").write_text(json.dumps(record, indent=1) + "\n")
    print()
    print(_table(summary["groups"]))
    print(f"\ntier: {record['tier']} ({gpu_reason or 'GPU present'}); {not_run} GPU checks did not run; "
          f"{seconds:.0f} s; reports in {reports}")
    print(f"verify: {verdict}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
