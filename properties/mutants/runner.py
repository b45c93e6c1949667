"""Probing a kernel (a mutant or the real one) through one tier: a subprocess whose PYTHONPATH puts the edited
copy first (the probe checks that it imported that copy) with a DSL cache of its own (``run_probe``), many at a
time (``_pool_run``); ``replay`` replays saved minimal cases: the real kernel must match the model on all of them,
each file's mutant must not. The generated run (generated.py) decides the verdicts.
"""

import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import interrupts
from common.provenance import REPO_ROOT
from properties.engine import casefile
from properties.mutants.probe import CORPUS_DIR
from properties.mutants.catalog import DIFFERENTIAL, STATIC, materialise

WORK_ROOT = REPO_ROOT / "build" / "mutants"
PROBE = "properties.mutants.probe"
PROBE_TIMEOUT_S = 900
LOG_TAIL = 4000


@dataclass
class Outcome:
    """One tier's verdict on one kernel (a mutant or the real one)."""

    tier: str
    killed: bool | None = None  # None: the probe failed to give a verdict (an error)
    evidence: list = field(default_factory=list)
    raised: list = field(default_factory=list)  # checks or kernel calls that raised: never a kill
    case: str | None = None
    error: str | None = None
    seconds: float = 0.0
    ptx: dict | None = None  # static tier: sha256 of each variant's PTX
    launches: str | None = None  # static tier: sha256 of the kernel and grid route launches for each call shape


def _probe_env(folder):
    """The copy first, then the repository and its tests; an inherited PYTHONPATH last (it may hold the DSL's
    packages)."""
    env = dict(os.environ)
    inherited = [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(REPO_ROOT), str(REPO_ROOT / "tests")] + inherited)
    env["CUTE_DSL_CACHE_DIR"] = str(folder / "cute-cache")
    env["CUTE_DSL_NO_CACHE"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_probe(mutant, tier, extra=(), make_copy=materialise):
    """Run tier ``tier`` on the mutant (None: the real kernel) in a subprocess; its Outcome. ``make_copy(mutant,
    folder)`` writes the edited kernel package into ``folder`` and returns its path."""
    name = mutant.name if mutant else "real"
    WORK_ROOT.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix=f"{name}-{tier}-", dir=WORK_ROOT))
    try:
        kernel_dir = make_copy(mutant, folder)
        result, log = folder / "result.json", folder / "probe.log"
        cmd = [sys.executable, "-m", PROBE, tier, "--kernel-dir", str(kernel_dir),
               "--result", str(result), "--name", name, *extra]
        if mutant is not None:
            cmd += ["--description", mutant.description]
        if tier == STATIC and mutant is not None and mutant.kills:
            cmd.append("--first-kill")  # one failing variant is the kill; equivalents and the real kernel go whole
        with open(log, "w") as out:
            try:
                rc = subprocess.call(cmd, cwd=folder, env=_probe_env(folder), stdout=out, stderr=subprocess.STDOUT,
                                     timeout=PROBE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                rc = "timeout"
        if rc == 0 and result.exists():
            data = json.loads(result.read_text())
            return Outcome(tier, data["killed"], data["evidence"], data.get("raised", []), data.get("case"), None,
                           time.perf_counter() - started, data.get("ptx_sha256"), data.get("launches_sha256"))
        return Outcome(tier, None, [], [], None, f"probe exit {rc}; log tail:\n{log.read_text()[-LOG_TAIL:]}",
                       time.perf_counter() - started)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _pool_run(work, jobs, log, make_copy=materialise):
    """{(name, tier): Outcome} of run_probe over ``work`` [(mutant or None, tier, extra args)], ``jobs`` at a time."""
    outcomes = {}
    with interrupts.ThreadPool(jobs) as pool:
        futures = {pool.submit(run_probe, mutant, tier, extra, make_copy): (mutant.name if mutant else "real", tier)
                   for mutant, tier, extra in work}
        for future in concurrent.futures.as_completed(futures):
            key, outcome = futures[future], future.result()
            outcomes[key] = outcome
            state = "error" if outcome.error else ("killed" if outcome.killed else
                                                   "raised" if outcome.raised else "not killed")
            log(f"  {key[0]:26s} {key[1]:12s} {state:10s} {outcome.seconds:6.1f} s"
                + (f"  {outcome.evidence[0].splitlines()[0][:100]}" if outcome.evidence else ""))
    return outcomes


def known_killers(mutant, tier):
    """The probe's extra arguments for ``mutant`` (None: the real kernel, which sweeps whole) under ``tier``: for the
    differential tier, its committed minimal case (probe.CORPUS_DIR) to try before the sweep."""
    saved = CORPUS_DIR / f"{mutant.name}.json" if mutant is not None else None
    return ("--known", str(saved)) if tier == DIFFERENTIAL and saved and saved.is_file() else ()


def _jobs(jobs, work):
    """``jobs``, else one probe per core: each is a compiler process of its own."""
    return jobs or max(1, min(len(work), os.cpu_count() or 1))


def replay(paths, mutants, make_copy, jobs=None, log=print):
    """Replay saved minimal cases (GPU): the real kernel must match the model on all of them, each file's
    mutant (by name among ``mutants``, made by ``make_copy`` as run_probe's) must not."""
    by_name = {m.name: m for m in mutants}
    paths = [Path(p).resolve() for p in paths]
    failures, work = [], [(None, "replay", ["--case", *map(str, paths)])]
    for path in paths:
        name = casefile.read(path).origin.get("mutant")
        if name not in by_name:
            failures.append(f"{path}: mutant {name!r} is not one of the generated set's")
        else:
            work.append((by_name[name], "replay", ["--case", str(path)]))
    outcomes = _pool_run(work, _jobs(jobs, work), log, make_copy)
    for (name, _), outcome in outcomes.items():
        want = name != "real"
        if outcome.error or outcome.killed is not want:
            failures.append(f"{name}: {outcome.error or outcome.evidence[:5] or 'its case no longer mismatches'}")
    for failure in failures:
        log(f"FAIL: {failure}")
    log(f"replay: {'FAIL' if failures else 'PASS'} ({len(paths)} cases)")
    return not failures
