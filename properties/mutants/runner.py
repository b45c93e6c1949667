"""Running the mutant catalog: every mutant (and the unedited kernel, which must pass, so no kill is vacuous)
through its tiers, each probe in a subprocess whose PYTHONPATH puts the edited copy first (the probe checks
that it imported that copy) with a DSL cache of its own; the verdicts, the kill table and the report.

``run`` with the GPU tier also replays the saved minimal cases on the real kernel, which must match;
``replay`` replays saved cases: the real kernel must match the model on all of them, each file's mutant must
not.
"""

import concurrent.futures
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import interrupts, provenance
from common.provenance import REPO_ROOT, cuda_reason, utc_now
from properties.engine import casefile
from properties.mutants import freshness
from properties.mutants.probe import CORPUS_DIR
from properties.mutants.catalog import (
    CATALOG,
    CPU_TIERS,
    DIFFERENTIAL,
    EQUIVALENT,
    STATIC,
    TIERS,
    check_catalog,
    materialise,
    mutated_sources,
)

DEFAULT_REPORT = REPO_ROOT / "reports" / "mutants.json"
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


def tiers_of(tier):
    """The tiers --tier ``tier`` ("cpu" or "gpu") runs."""
    return TIERS if tier == "gpu" else CPU_TIERS


def plan(mutants, tiers, all_static):
    """(mutant or None for the real kernel, tier) jobs: the real kernel under every tier; each mutant under
    every tier of its family (``Mutant.tiers``) when the GPU tiers run, else under the CPU tiers it declares
    (and, with ``all_static``, under the static tier whatever it declares)."""
    jobs = [(None, tier) for tier in tiers]
    for mutant in mutants:
        for tier in (t for t in tiers if t in mutant.tiers):
            if DIFFERENTIAL in tiers or tier in mutant.kills or (all_static and tier == STATIC):
                jobs.append((mutant, tier))
    return jobs


def definition(mutant):
    """sha256 of what ``mutant`` is: the kernel files it edits, as edited, and the tiers it declares."""
    data = [mutant.name, sorted(mutant.kills), sorted(mutated_sources(mutant).items())]
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()


def reusable(previous, inputs):
    """{mutant: row} of a previous kill table's rows that hold for this tree: the table ran every tier for exactly
    ``inputs`` (properties/mutants/freshness.py) and the row's mutant was killed by each tier it declares."""
    if not previous or previous.get("tier") != "gpu" or previous.get("inputs") != inputs:
        return {}
    return {row["mutant"]: row for row in previous["mutants"]
            if row.get("definition") and not row["not_run"] and set(row["expected"]) <= set(row["killed_by"])}


def verdicts(mutants, tiers, outcomes):
    """(failures, rows): a failure for every error, every real-kernel kill, every declared tier (that ran)
    which missed its mutant, every mutant that compiles to the real kernel's PTX and launches it alike (the same
    kernel and grid for every call shape), and every mutant no tier killed when all tiers of its family ran."""
    failures, rows = [], []
    for tier in tiers:
        real = outcomes[("real", tier)]
        if real.error or real.killed or real.raised:
            failures.append(f"the real kernel fails the {tier} tier: {real.error or real.evidence[:5] or real.raised[:5]}")
    real_static = outcomes.get(("real", STATIC))
    for mutant in mutants:
        ran = {tier: outcomes[(mutant.name, tier)] for tier in tiers if (mutant.name, tier) in outcomes}
        failures += [f"{mutant.name} ({tier}): {o.error}" for tier, o in ran.items() if o.error]
        missed = [tier for tier in sorted(mutant.kills) if tier in ran and ran[tier].killed is False]
        if missed:
            raised = [tier for tier in missed if ran[tier].raised]
            failures.append(f"{mutant.name}: declared killed by {missed}, which did not kill it"
                            + (f" ({raised} raised: {[ran[t].raised[0] for t in raised]}; a raise is not a kill)"
                               if raised else ""))
        if real_static and real_static.ptx and STATIC in ran and \
                (ran[STATIC].ptx, ran[STATIC].launches) == (real_static.ptx, real_static.launches):
            failures.append(f"{mutant.name}: compiles to the real kernel's PTX and launches it alike, so nothing can "
                            "kill it (equivalent)")
        killed_by = [tier for tier, o in ran.items() if o.killed]
        if set(mutant.tiers) <= set(tiers) and not killed_by:
            failures.append(f"{mutant.name}: survived every tier")
        rows.append({"mutant": mutant.name, "definition": definition(mutant), "description": mutant.description,
                     "tiers": list(mutant.tiers), "expected": [t for t in mutant.tiers if t in mutant.kills],
                     "escapes": mutant.escapes,
                     "killed_by": killed_by, "not_killed_by": [t for t, o in ran.items() if o.killed is False],
                     "raised_in": [t for t, o in ran.items() if o.raised],
                     "not_run": [t for t in mutant.tiers if t not in ran],
                     "case": next((o.case for o in ran.values() if o.case), None),
                     "evidence": {t: o.evidence[:6] for t, o in ran.items()},
                     "seconds": {t: round(o.seconds, 1) for t, o in ran.items()}})
    return failures, rows


def table(rows):
    """The kill table in Markdown."""
    lines = ["| mutant | what it breaks | expected | killed by | minimal case |", "|---|---|---|---|---|"]
    for row in rows:
        killed = ", ".join(t if t in row["expected"] else f"{t} (unexpected)" for t in row["killed_by"]) \
            or (f"**raised** in {', '.join(row['raised_in'])}" if row["raised_in"] else
                "not yet" if row["not_run"] else "**survived**")
        if row["not_run"]:
            killed += f" ({', '.join(row['not_run'])} not run)"
        case = Path(row["case"]).name if row["case"] else ""
        lines.append(f"| {row['mutant']} | {row['description']} | {', '.join(row['expected'])} | {killed} | {case} |")
    return "\n".join(lines)


def _pool_run(work, jobs, log):
    """{(name, tier): Outcome} of run_probe over ``work`` [(mutant or None, tier, extra args)], ``jobs`` at a time."""
    outcomes = {}
    with interrupts.ThreadPool(jobs) as pool:
        futures = {pool.submit(run_probe, mutant, tier, extra): (mutant.name if mutant else "real", tier)
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


def run(tier="auto", only=(), all_static=False, jobs=None, report=DEFAULT_REPORT, log=print, reuse=None):
    """Run the catalog; writes ``report`` (unless None) and returns its record (``verdict`` PASS or FAIL).
    With the GPU tier, the saved minimal cases are then replayed on the real kernel, which must match. ``reuse``:
    a previous kill table (a path) whose rows are kept, unprobed, for each mutant that is the same edit of the same
    inputs (``reusable``); the real kernel always runs."""
    check_catalog()
    inputs = freshness.inputs()  # before any probe runs: what these verdicts were made for
    gpu = cuda_reason() is None
    if tier == "auto":
        tier = "gpu" if gpu else "cpu"
    if tier == "gpu" and not gpu:
        raise RuntimeError("--tier gpu: no CUDA device here (torch.cuda.is_available() is False)")
    tiers = tiers_of(tier)
    unknown = set(only) - {m.name for m in CATALOG}
    if unknown:
        raise ValueError(f"--only: no mutant named {sorted(unknown)}; the catalog has {[m.name for m in CATALOG]}")
    mutants = [m for m in CATALOG if not only or m.name in only]
    kept = reusable(json.loads(Path(reuse).read_text()), inputs) if reuse and tier == "gpu" else {}
    kept = {m.name: {**kept[m.name], "reused": True} for m in mutants
            if m.name in kept and kept[m.name]["definition"] == definition(m)}
    probed = [m for m in mutants if m.name not in kept]
    work = [(mutant, t, known_killers(mutant, t)) for mutant, t in plan(probed, tiers, all_static)]
    jobs = _jobs(jobs, work)
    log(f"mutants: {len(mutants)} mutants ({len(kept)} reused) + the real kernel, tiers {list(tiers)}, {len(work)} probes, "
        f"{jobs} at a time")
    started = time.perf_counter()
    outcomes = _pool_run(work, jobs, log)
    failures, rows = verdicts(probed, tiers, outcomes)
    by_name = {row["mutant"]: row for row in rows} | kept
    rows = [by_name[m.name] for m in mutants]
    cases = [row["case"] for row in rows if row["case"]]
    if DIFFERENTIAL in tiers and cases:
        real = run_probe(None, "replay", ["--case", *cases])
        if real.error or real.killed:
            failures.append(f"the real kernel mismatches saved minimal cases: {real.error or real.evidence[:5]}")
    environment = provenance.record()
    record = {"verdict": "FAIL" if failures else "PASS", "tier": tier, "tiers_run": list(tiers),
              "seconds": round(time.perf_counter() - started, 1), "failures": failures,
              "real": {t: {"passed": outcomes[("real", t)].killed is False, "error": outcomes[("real", t)].error,
                           "evidence": outcomes[("real", t)].evidence[:6]} for t in tiers},
              "mutants": rows,
              "equivalent": [{"mutant": m.name, "description": m.description, "reason": m.reason} for m in EQUIVALENT],
              "finished": utc_now(), "gpu": environment["gpu"], "commit": environment["commit"],
              "environment": environment, "inputs": inputs}
    if report:
        Path(report).parent.mkdir(parents=True, exist_ok=True)
        Path(report).write_text(json.dumps(record, indent=1) + "\n")
    log(table(rows))
    for failure in failures:
        log(f"FAIL: {failure}")
    log(f"mutants: {record['verdict']} ({len(rows)} mutants, {record['seconds']} s)"
        + (f"; report {report}" if report else ""))
    return record


def replay(paths, jobs=None, log=print):
    """Replay saved minimal cases (GPU): the real kernel must match the model on all of them, each file's
    mutant must not."""
    by_name = {m.name: m for m in CATALOG}
    paths = [Path(p).resolve() for p in paths]
    failures, work = [], [(None, "replay", ["--case", *map(str, paths)])]
    for path in paths:
        name = casefile.read(path).origin.get("mutant")
        if name not in by_name:
            failures.append(f"{path}: mutant {name!r} is not in the catalog")
        else:
            work.append((by_name[name], "replay", ["--case", str(path)]))
    outcomes = _pool_run(work, _jobs(jobs, work), log)
    for (name, _), outcome in outcomes.items():
        want = name != "real"
        if outcome.error or outcome.killed is not want:
            failures.append(f"{name}: {outcome.error or outcome.evidence[:5] or 'its case no longer mismatches'}")
    for failure in failures:
        log(f"FAIL: {failure}")
    log(f"replay: {'FAIL' if failures else 'PASS'} ({len(paths)} cases)")
    return not failures
