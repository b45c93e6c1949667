"""The periodic mutmut report (not part of CI): mutmut 3 over the model's routing and the case-file code, run
on a copy of the tree, with the fast tests of those modules; the survivors, each with its diff, go to
properties/results/mutmut-report.json.

    python -m properties.mutants.mutmut_report [--timeout S] [--max-children 2]    (needs `pip install mutmut==3.*`)

The configuration lives here (written into the copy's pyproject.toml), so the repository's own files stay
as they are. A survivor is a lead, not a verdict: mutmut does not know which edits are equivalent.
"""

import argparse
import json
import shutil
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

from common.provenance import REPO_ROOT, commit, utc_now
from properties.mutants.harness_run import copy_tree

REPORT = REPO_ROOT / "properties" / "results" / "mutmut-report.json"
WORK = REPO_ROOT / "build" / "mutmut"
MUTATED = ("oracles/numpy_model/routing.py", "properties/engine/casefile.py")
TESTS = ("tests/test_model_routing.py", "tests/test_casefile_roundtrip_cpu.py", "tests/test_invariants_cpu.py")
CONFIG = f"""
[tool.mutmut]
source_paths = ["common", "kernel", "oracles", "properties"]
only_mutate = {json.dumps(list(MUTATED))}
also_copy = ["conftest.py", "corpora"]
pytest_add_cli_args = ["-p", "no:cacheprovider", "--hypothesis-profile=ci"]
pytest_add_cli_args_test_selection = {json.dumps(list(TESTS))}
"""


def _mutmut(tree, *args, timeout=None):
    return subprocess.run([sys.executable, "-m", "mutmut", *args], cwd=tree, capture_output=True, text=True,
                          timeout=timeout)


def report(timeout_s, max_children, out=REPORT):
    """Run mutmut on a fresh copy; write and return the report."""
    tree = WORK / "tree"
    shutil.rmtree(WORK, ignore_errors=True)
    tree.mkdir(parents=True)
    copy_tree(tree)
    with open(tree / "pyproject.toml", "a") as f:
        f.write(CONFIG)
    started = time.perf_counter()
    try:
        ran = _mutmut(tree, "run", "--max-children", str(max_children), timeout=timeout_s)
        finished, tail = True, (ran.stdout + ran.stderr)[-2000:]
    except subprocess.TimeoutExpired as exc:
        finished, tail = False, f"stopped after {timeout_s} s: {str(exc.stdout or '')[-1000:]}"
    seconds = round(time.perf_counter() - started, 1)
    statuses = {}
    for line in _mutmut(tree, "results", "--all", "true").stdout.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name:
            statuses[name] = status
    counts = {s: list(statuses.values()).count(s) for s in sorted(set(statuses.values()))}
    survivors = [{"mutant": name, "diff": _mutmut(tree, "show", name).stdout.split("\n", 1)[-1].strip()}
                 for name, status in statuses.items() if status == "survived"]
    record = {"tool": f"mutmut {version('mutmut')}", "commit": commit(), "finished": utc_now(),
              "mutated": list(MUTATED), "tests": list(TESTS), "max_children": max_children, "seconds": seconds,
              "completed": finished, "counts": counts, "survivors": survivors, "log_tail": tail}
    Path(out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"mutmut: {counts} in {seconds} s ({'completed' if finished else 'stopped'}); {len(survivors)} survivors; "
          f"report {out}")
    return record


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timeout", type=int, default=900, help="seconds for `mutmut run`")
    parser.add_argument("--max-children", type=int, default=2)
    parser.add_argument("--out", default=str(REPORT))
    args = parser.parse_args(argv)
    report(args.timeout, args.max_children, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
