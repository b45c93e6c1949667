"""`make harness-mutants`: every harness mutant (properties/mutants/harness.py) applied to a copy of the tree,
its intended tests run there, each verdict attributed (properties/mutants/attribution.py); the unedited copy
through the same path first, where every intended test must pass.

    python -m properties.mutants.harness_run [--only NAME ...] [--jobs 2] [--out PATH]

Verdicts: "killed" (an intended test failed on an assertion), "raised" (an intended test or its collection
raised something else: not a kill), "survived" (every intended test passed), "error" (the mutant did not
apply). Writes the kill table to reports/harness-mutants.json and .md (--out PATH elsewhere; the committed
table is refreshed only by naming it: --out properties/results/harness-mutants.json); exit 1 unless the real
tree passes, at least one mutant ran and every mutant is killed. Every argument is checked before any work
(an unknown --only name, --jobs out of range, --out a folder: one line, exit 2).
"""

if __name__ == "__main__":  # Ctrl-C while the imports below load: one line, never a traceback
    from common.interrupts import at_start
    at_start("python -m properties.mutants.harness_run")

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common.provenance import REPO_ROOT, utc_now
from common.provenance import record as provenance_record
from properties.mutants import harness
from properties.mutants.attribution import ENV as ATTRIBUTION_ENV
from properties.mutants.catalog import MutantEditError
from common import args as types
from common import interrupts
from common.args import OneLineParser

RESULTS = REPO_ROOT / "properties" / "results" / "harness-mutants.json"  # the committed kill table
DEFAULT_OUT = REPO_ROOT / "reports" / "harness-mutants.json"
MAX_JOBS = 16
WORK_ROOT = REPO_ROOT / "build" / "harness-mutants"
TIMEOUT_S = 600
DEFAULT_JOBS = 2
LOG_TAIL = 1500


def digest(mutant):
    """sha256 of a mutant's definition: a committed verdict holds only for the definition it was made with."""
    data = [mutant.name, mutant.target, mutant.description, list(mutant.killers), [list(e) for e in mutant.edits],
            getattr(mutant.data, "__name__", None), mutant.files]
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()[:16]


def copy_tree(folder):
    """The repository's files (tracked, and untracked ones git does not ignore) copied under ``folder``."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO_ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO_ROOT / name
        if source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    return folder


def _pytest(folder, nodeids):
    """Run ``nodeids`` in the copy ``folder``; (the attribution record, or None, and the log tail)."""
    record = folder / "attribution.json"
    env = {**os.environ, "PYTHONPATH": str(folder), ATTRIBUTION_ENV: str(record), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "properties.mutants.attribution",
           "--hypothesis-profile=ci", *nodeids]
    try:
        done = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        log = done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        return None, f"timed out after {TIMEOUT_S} s: {exc}"
    data = json.loads(record.read_text()) if record.exists() else None
    if data is not None and Path(data["root"]) != folder.resolve():
        raise RuntimeError(f"the copy in {folder} imported the harness from {data['root']}")
    return data, log[-LOG_TAIL:]


def verdict(data, killers):
    """(verdict, {killer: how it ended}) of one mutant's run."""
    if data is None:
        return "raised", {k: "no result" for k in killers}
    ended = {k: data["tests"].get(k, {"outcome": "not collected", "detail": ""}) for k in killers}
    outcomes = {e["outcome"] for e in ended.values()}
    shown = {k: f"{e['outcome']}{': ' + e['detail'] if e['detail'] else ''}" for k, e in ended.items()}
    if "assertion" in outcomes:
        return "killed", shown
    if outcomes == {"passed"} and not data["collection_errors"]:
        return "survived", shown
    return "raised", shown


def run_one(mutant, nodeids):
    """The mutant (None: the real tree) applied to a fresh copy, ``nodeids`` run there: a result row."""
    WORK_ROOT.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix=f"{mutant.name if mutant else 'real'}-", dir=WORK_ROOT)).resolve()
    try:
        copy_tree(folder)
        if mutant is not None:
            harness.apply(mutant, folder)
        data, log = _pytest(folder, nodeids)
    except MutantEditError as exc:
        return {"verdict": "error", "tests": {}, "log": str(exc), "seconds": 0.0}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if mutant is None:
        passed = data is not None and not data["collection_errors"] and all(
            data["tests"].get(k, {}).get("outcome") == "passed" for k in nodeids)
        found = "passed" if passed else "failed"
        return {"verdict": found, "tests": {k: data["tests"].get(k) if data else None for k in nodeids},
                "log": "" if passed else log, "seconds": round(time.perf_counter() - started, 1)}
    found, tests = verdict(data, mutant.killers)
    return {"verdict": found, "tests": tests, "log": "" if found == "killed" else log,
            "seconds": round(time.perf_counter() - started, 1)}


def table(rows):
    """The kill table in Markdown."""
    lines = ["| mutant | target | what it breaks | intended test | verdict |", "|---|---|---|---|---|"]
    for row in rows:
        tests = "<br>".join(f"`{k.replace('|', '/')}`" for k in row["killers"])
        lines.append(f"| {row['mutant']} | `{row['target']}` | {row['description']} | {tests} | {row['verdict']} |")
    return "\n".join(lines) + "\n"


def run(names=(), jobs=DEFAULT_JOBS, out=DEFAULT_OUT, log=print):
    """Run the catalog (or the mutants named); returns the record (``verdict`` PASS or FAIL), written to
    ``out`` (and its .md) unless ``out`` is None."""
    harness.check_catalog(REPO_ROOT)
    unknown = set(names) - {m.name for m in harness.CATALOG}
    if unknown:
        raise ValueError(f"--only: no harness mutant named {sorted(unknown)}")
    mutants = [m for m in harness.CATALOG if not names or m.name in names]
    started = time.perf_counter()
    killers = sorted({k for m in mutants for k in m.killers})
    real = run_one(None, killers)
    log(f"real tree: {real['verdict']} ({len(killers)} intended tests, {real['seconds']} s)")
    rows = []
    with interrupts.ThreadPool(jobs) as pool:
        for mutant, result in zip(mutants, pool.map(lambda m: run_one(m, m.killers), mutants)):
            log(f"  {mutant.name:34s} {result['verdict']:9s} {result['seconds']:6.1f} s")
            rows.append({"mutant": mutant.name, "target": mutant.target, "description": mutant.description,
                         "killers": list(mutant.killers), "digest": digest(mutant), **result})
    failures = ([] if real["verdict"] == "passed" else [f"the real tree fails its intended tests: {real['tests']}"])
    failures += [f"{row['mutant']}: {row['verdict']}" for row in rows if row["verdict"] != "killed"]
    failures += [] if rows else ["no mutant ran: nothing was checked"]
    env = provenance_record(())
    record = {"verdict": "FAIL" if failures else "PASS", "seconds": round(time.perf_counter() - started, 1),
              "jobs": jobs, "commit": env.get("commit"), "finished": utc_now(), "real": real,
              "failures": failures, "mutants": rows}
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(record, indent=1) + "\n")
        Path(out).with_suffix(".md").write_text(
            f"# Harness mutants: {record['verdict']}, {len(rows)} mutants, {record['seconds']} s "
            f"({jobs} at a time), commit {record['commit']}, {record['finished']}\n\n" + table(rows))
    for failure in failures:
        log(f"FAIL: {failure}")
    log(f"harness mutants: {record['verdict']} ({len(rows)} mutants, {record['seconds']} s)")
    return record


def main(argv=None):
    parser = OneLineParser(prog="python -m properties.mutants.harness_run", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", default=(), metavar="NAME", help="run only these mutants")
    parser.add_argument("--jobs", type=types.integer(1, MAX_JOBS), default=DEFAULT_JOBS,
                        help="mutated copies at a time")
    parser.add_argument("--out", type=types.output_file, default=str(DEFAULT_OUT),
                        help=f"the results file and its .md kill table (default {DEFAULT_OUT.relative_to(REPO_ROOT)})")
    args = parser.parse_args(argv)
    unknown = [name for name in args.only if name not in {m.name for m in harness.CATALOG}]
    if unknown:
        parser.error(f"--only: no harness mutant named {', '.join(unknown)} (see properties/mutants/harness.py)")
    if args.out.with_suffix(".md").is_dir():
        parser.error(f"--out: its kill table {args.out.with_suffix('.md')} would replace a folder")
    return 0 if run(args.only, args.jobs, args.out)["verdict"] == "PASS" else 1


if __name__ == "__main__":
    sys.exit(interrupts.run("python -m properties.mutants.harness_run", main))
