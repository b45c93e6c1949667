"""Running the generated mutants (properties/mutants/generate.py) through the tiers, and their mutation score.

Stages, each mutant stopping at its first kill:
1. Coverage: the real kernel's import, each variant's compile and the launch digest traced in one worker
   (properties/mutants/prefilter.py), which also runs the real kernel through the static tier.
2. The CPU prefilter, ``jobs`` workers in parallel: each mutant whose edited lines run at import or in a
   variant's compile or the launch digest is compiled for the variants whose compile runs them (all of them for
   an import-time line; the others keep the real kernel's PTX, since none of their code changed) and run
   through the static tier. A mutant whose lines run only inside device code and the launch digest, with the
   real kernel's PTX for every variant and the same launch digest, is equivalent (decided by the machine).
   Code that no compile runs (route's host code, the contract) keeps the real PTX by construction and is
   never called equivalent by it: the tiers that call route must kill it.
3. The tiers that call the kernel, in order (a tier that killed it in the resumed record first):
   contract-cpu (host code of the contract or of route), differential and contract-gpu (GPU). Each in a
   fresh process on the mutant's copy (properties/mutants/runner.py's ``run_probe``; the differential tier
   tries the mutant's committed minimal case, corpora/mutants/<name>.json, before its sweep); the real kernel
   must pass every tier that runs, so no kill is vacuous.

A mutant listed in properties/mutants/equivalents.py (named by site, with the reason) is not run. The record
(``score``) holds, per file and function and per operator: sites, mutants, equivalent, killed, survived; every
survivor's diff. It is written, each verdict settled, after the prefilter and after each probe, and ``resume``
reuses each mutant's tier outcomes whose mutant digest (the edited package's sha256) and harness digest are
unchanged. A mutant's probe still running HANG_FACTOR times as long as the real kernel's probe of the same tier
(at least HANG_FLOOR_S) is taken for a kernel that never finishes: a watchdog ends its process and the tier counts
the mutant crashed, as mutation tools count a timeout.
"""

import ast
import concurrent.futures
import functools
import hashlib
import itertools
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

from common import interrupts
from common.provenance import REPO_ROOT, cuda_reason, host, record, shown, utc_now
from properties.mutants import equivalents, freshness, generate, probe, refresh, runner
from properties.mutants.catalog import CONTRACT_CPU, CONTRACT_GPU, DIFFERENTIAL, KERNEL_DIR, STATIC

DEFAULT_OUT = REPO_ROOT / "reports" / "mutants-generated.json"
WORK_ROOT = REPO_ROOT / "build" / "mutants-generated"
PREFILTER = "properties.mutants.prefilter"
GPU_TIERS = (DIFFERENTIAL, CONTRACT_GPU)
# Mutants per prefilter worker process: its start (the DSL's import) is paid once per batch, and a run stopped at
# its time budget waits for at most one batch per worker.
BATCH = 8
# killed: a check or a comparison saw it; not_viable: its compile fails or crashes; crashed: a tier's probe raised
# or timed out on it (the real kernel passing that tier); the three count as detected.
VERDICTS = ("killed", "not_viable", "crashed", "equivalent", "survived", "not_run")
DETECTED = ("killed", "not_viable", "crashed")
HANG_FACTOR = 5  # a whole differential sweep of a mutant took at most 44 s among 16 probes at once (H200)
HANG_FLOOR_S = 120
# Python's start-up imports this module from the first folder on the path that holds one; a probe puts its own
# folder first (runner._probe_env), so a file of this name there runs in the probe's process before anything else.
WATCHDOG = "sitecustomize.py"
WATCHDOG_SOURCE = '''"""The generated mutants' watchdog: SIGALRM ends this probe after {seconds} s (a kernel that never finishes)."""
import signal

signal.alarm({seconds})
'''
ENDED_BY_WATCHDOG = f"probe exit {-signal.SIGALRM};"  # how runner.run_probe reports a process SIGALRM ended


EQUIVALENTS_FILE = Path(equivalents.__file__).relative_to(REPO_ROOT).as_posix()


def harness_digest(root=REPO_ROOT):
    """sha256 of what decides a verdict besides the mutant's own kernel: the evidence record's inputs
    (freshness.py: every repository module the run, the prefilter and the probes import, followed through their
    imports, and the data they read) but the kernel's files and the list of equivalents (no probe reads it; every
    refresh decides the listed mutants anew), and the packages' versions. A change anywhere else keeps every
    outcome (properties/mutants/refresh.py's KEPT), so listing an equivalent re-runs nothing."""
    files = {path: sha for path, sha in freshness.inputs(Path(root)).items()
             if not path.startswith("kernel/") and path != EQUIVALENTS_FILE}
    return hashlib.sha256(json.dumps([record()["packages"], sorted(files.items())]).encode()).hexdigest()


def select(mutants, only):
    """The mutants named in ``only`` (a name, or a prefix of names ending at a dot: a file or function);
    ValueError naming any that selects none."""
    if not only:
        return list(mutants)
    chosen = [m for m in mutants if any(m.name == o or m.name.startswith(o + ".") for o in only)]
    unknown = [o for o in only if not any(m.name == o or m.name.startswith(o + ".") for m in mutants)]
    if unknown:
        raise ValueError(f"--only: no generated mutant named {', '.join(unknown)} (a name or a prefix such as "
                         "routing._top_k)")
    return chosen


def _copy(mutant, folder, kernel_dir=KERNEL_DIR):
    """folder/kernel: the kernel package with the mutant applied (None: unedited)."""
    target = Path(folder) / "kernel"
    target.mkdir(parents=True, exist_ok=True)
    for name, text in generate.sources_of(mutant, kernel_dir).items():
        (target / name).write_text(text)
    return target


def _watched_copy(mutant, folder, seconds):
    """_copy, and beside it the watchdog that ends the probe started in ``folder`` after ``seconds`` (the alarm
    signal's default action: no Python code need run, so it ends a process waiting inside a CUDA call)."""
    (Path(folder) / WATCHDOG).write_text(WATCHDOG_SOURCE.format(seconds=seconds))
    return _copy(mutant, folder)


def statements(text):
    """Every statement of a source, as ((start line, column), (end line, column), its first line)."""
    return [((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset), n.lineno)
            for n in ast.walk(ast.parse(text)) if isinstance(n, ast.stmt)]


def lines_of(mutant, spans=()):
    """The lines of the mutant's segment and the first line of the innermost statement holding each of its ends
    (a line inside a statement that spans several, such as a tuple's, is not traced, the statement's is)."""
    lines = set(range(mutant.start[0], mutant.end[0] + 1))
    for position in (mutant.start, mutant.end):
        holding = [span for span in spans if span[0] <= position <= span[1]]
        if holding:
            lines.add(max(holding)[2])
    return lines


def reach(mutant, coverage, spans=()):
    """(variants whose compile must run, whether the launch digest runs it, whether the machine may decide
    equivalence): see the module's docstring. ``spans``: statements() of the mutant's file."""
    file, lines = mutant.target, lines_of(mutant, spans)
    imported = lines & set(coverage["import"].get(file, ()))
    launch = bool(lines & set(coverage["launches"].get(file, ())))
    device = {name: lines & set(v["device"].get(file, ())) for name, v in coverage["variants"].items()}
    host_lines = {name: lines & set(v["host"].get(file, ())) for name, v in coverage["variants"].items()}
    variants = sorted(coverage["variants"]) if imported else \
        sorted(name for name in coverage["variants"] if device[name] or host_lines[name])
    decidable = (any(device.values()) or launch) and not imported and not any(host_lines.values()) \
        and not mutant.contract
    return variants, launch, decidable


def tiers_after_prefilter(mutant, decidable, differs, launches=False):
    """The tiers that call route, in order, for a mutant the static tier did not kill: the contract's first for the
    contract and for host code that compiles to the real PTX, the differential first where the PTX or launches
    changed; where what route launches changed (``launches``: the launch digest), also the contract's GPU tier,
    which reads the launches back (a kernel launched in place of another gives the same outputs)."""
    if mutant.contract:
        return [CONTRACT_CPU, CONTRACT_GPU] + ([DIFFERENTIAL] if differs else [])
    if decidable:
        return [DIFFERENTIAL] + ([CONTRACT_GPU] if launches else [])
    return [DIFFERENTIAL, CONTRACT_CPU, CONTRACT_GPU] if differs else [CONTRACT_CPU, DIFFERENTIAL, CONTRACT_GPU]


class Run:
    """One run of the generated set: the rows by name, written to ``out`` as they change; ``resume``, the record it
    refreshes (properties/mutants/refresh.py decides what each mutant needs)."""

    def __init__(self, mutants, tier, out, resume, jobs, log, seconds=None, reviewed=(), selection=()):
        self.mutants, self.tier, self.out, self.jobs, self.log = mutants, tier, out, jobs, log
        self.runnable = (CONTRACT_CPU,) + (GPU_TIERS if tier == "gpu" else ())  # the tiers that call route
        self.deadline = None if seconds is None else time.perf_counter() + seconds
        self.stopped = False
        self.selection = list(selection)
        self.inputs = freshness.inputs()  # before any probe runs: what these verdicts are made for
        self.harness = harness_digest()
        self.provenance, self.host = record(), host()
        self.lock = threading.Lock()
        previous = json.loads(Path(resume).read_text()) if resume else {"mutants": []}
        same_harness = previous.get("harness_digest") == self.harness
        # A seed stopped at its time budget on this same tree is this refresh's own earlier call: it goes on.
        continuing = bool(previous.get("stopped_at_time_budget")) and previous.get("inputs") == self.inputs
        earlier = previous.get("refresh") or {}
        self.earlier, self.seed = None, None
        if continuing:
            self.earlier = {"seconds": earlier.get("seconds", 0.0), "calls": earlier.get("calls", 1)}
            self.seed = earlier.get("seed")
        elif resume:
            self.seed = {"record": str(resume), "commit": previous.get("provenance", {}).get("commit"),
                         "seconds": previous.get("seconds")}
        self.previous = {row["mutant"]: row for row in previous["mutants"]}
        self.rows = {}
        self.failures = []
        texts = generate.sources_of(None, KERNEL_DIR)
        for m in mutants:
            sources = generate.sources_of(m, KERNEL_DIR, texts)
            row = {"mutant": m.name, "file": f"kernel/{m.target}", "function": m.function, "operator": m.operator,
                   "ordinal": m.ordinal, "line": m.start[0], "old": m.old, "new": m.new,
                   "digest": generate.digest(sources), "site_sha": refresh.site_sha(m, texts[m.target]),
                   "prefilter": None, "tiers": {}, "plan": [], "verdict": "not_run", "killed_by": None, "case": None}
            old = self.previous.get(m.name)
            action = refresh.decide(old, row, m.name in equivalents.LISTED, same_harness, reviewed)
            if action == refresh.KEPT:  # a confirmation the seed's run began goes on where it stopped
                row.update(prefilter=old.get("prefilter"), tiers=old.get("tiers", {}), plan=old.get("plan", []))
                if old.get("confirm"):
                    row["confirm"] = dict(old["confirm"])
            elif action == refresh.CONFIRM:
                row["confirm"] = {"tier": old["killed_by"], "case": refresh.saved_case(old)}
            elif action == refresh.REVIEW:
                self.failures.append(f"{m.name}: listed equivalent, but its site changed since {resume}: re-read its "
                                     "reason in properties/mutants/equivalents.py, then refresh again with --reviewed "
                                     f"{m.name}")
            row["refresh"] = {"action": action}
            if action == refresh.KEPT and continuing and old.get("refresh"):  # what the earlier call did for it
                row["refresh"] = {k: v for k, v in old["refresh"].items() if k != "result"}
            row["known_kill"] = old.get("killed_by") if old else None
            self.rows[m.name] = row
        self.real = {}
        self.hang_s = {}  # tier: seconds after which a mutant's probe is ended (from the real kernel's probe)
        self.started = time.perf_counter()

    # ---- the record
    def write(self):
        if self.out is None:
            return
        with self.lock:  # probes finish on several threads: one writer at a time, or two share the .tmp file
            Path(self.out).parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(str(self.out) + ".tmp")
            tmp.write_text(json.dumps(self.record(), indent=1) + "\n")
            tmp.replace(self.out)

    def record(self):
        rows = [self.rows[m.name] for m in self.mutants]
        for m, row in zip(self.mutants, rows):
            settle(row)
            row["case"] = killing_case(row)
            row["refresh"]["result"] = refresh_result(row)
            if row["verdict"] == "survived":
                row["diff"] = generate.diff(m, KERNEL_DIR)
        seconds = round(time.perf_counter() - self.started, 1)
        complete = not self.selection and not self.stopped and all(r["verdict"] != "not_run" for r in rows)
        return {"kind": freshness.RECORD_KIND, "verdict": "PASS" if self.passed(rows) else "FAIL", "tier": self.tier,
                "complete": complete, "selection": self.selection, "inputs": self.inputs,
                "provenance": self.provenance, "host": self.host, "harness_digest": self.harness,
                "kernel_digest": generate.digest(generate.sources_of(None, KERNEL_DIR)),
                "seconds": seconds, "refresh": refresh_counts(rows, seconds, self.seed, self.earlier), "failures": self.failures,
                "hang_seconds": self.hang_s,
                "stopped_at_time_budget": self.stopped,
                "real": self.real, "score": score(rows),
                "survivors": [{"mutant": r["mutant"], "site": f"{r['file']}:{r['line']}", "diff": r.get("diff")}
                              for r in rows if r["verdict"] == "survived"],
                "listed_equivalent": equivalents.LISTED, "mutants": rows, "finished": utc_now()}

    def passed(self, rows):
        return not self.failures and all(r["verdict"] in DETECTED + ("equivalent",) for r in rows)

    # ---- stage 1 and 2: coverage and the prefilter
    def _workers(self, plans):
        """Run the prefilter worker on each plan at once; the JSON lines of each. A worker that dies (a mutant
        whose compile crashes the process) gives that mutant an error line and a fresh worker takes the rest."""
        with interrupts.ThreadPool(max(1, len(plans))) as pool:
            return list(pool.map(self._worker, plans))

    def out_of_time(self):
        """Whether the time budget is spent: no new batch or probe starts (the run is resumed later)."""
        if self.deadline is not None and time.perf_counter() > self.deadline:
            self.stopped = True
        return self.stopped

    def _worker(self, plan):
        lines = []
        while not (plan.get("coverage") is None and self.out_of_time()):
            folder = Path(tempfile.mkdtemp(prefix="worker-", dir=WORK_ROOT))
            (folder / "plan.json").write_text(json.dumps(plan))
            env = runner._probe_env(folder)
            env["PYTHONPATH"] = os.pathsep.join(p for p in env["PYTHONPATH"].split(os.pathsep) if p != str(folder))
            with open(folder / "worker.log", "w") as log:
                rc = subprocess.call([sys.executable, "-m", PREFILTER, "plan.json", "result.jsonl"], cwd=folder,
                                     env=env, stdout=log, stderr=subprocess.STDOUT)
            out = folder / "result.jsonl"
            done = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
            lines += done
            tail = (folder / "worker.log").read_text()[-2000:]
            shutil.rmtree(folder, ignore_errors=True)
            if rc == 0:
                return lines
            finished = {x.get("name") for x in done}
            rest = [job for job in plan["mutants"] if job["name"] not in finished]
            if plan.get("coverage") and not any("coverage" in x for x in done) or not rest or rest[0]["name"] == "real":
                self.failures.append(f"prefilter worker exit {rc}: {tail}")
                return lines
            lines.append({"name": rest[0]["name"], "error": f"the compile crashed its process (exit {rc}): {tail[-300:]}"})
            plan = {"coverage": None, "mutants": rest[1:]}
        return lines

    def coverage(self):
        """Stage 1: the real kernel's coverage and static tier in one worker; each row's reach. False on a failure."""
        WORK_ROOT.mkdir(parents=True, exist_ok=True)
        self.base = Path(tempfile.mkdtemp(prefix="copies-", dir=WORK_ROOT))
        self.real_dir = str(_copy(None, self.base / "real"))
        self.copies = itertools.count()
        all_variants = [list(k) for k in _variant_keys()]
        (first,) = self._workers([{"coverage": self.real_dir, "mutants": [{"name": "real", "dir": self.real_dir,
                                                                           "variants": all_variants}]}])
        coverage = next((x["coverage"] for x in first if "coverage" in x), None)
        real = next((x for x in first if x.get("name") == "real"), {"error": "the coverage worker gave no result"})
        if coverage is None or "error" in real:
            self.failures.append(f"the real kernel's coverage and static tier: {real.get('error')}")
            return False
        self.real[STATIC] = {"passed": real.get("killed") is False and not real.get("raised"),
                             "evidence": real.get("evidence", [])[:6], "error": real.get("error")}
        if not self.real[STATIC]["passed"]:
            self.failures.append(f"the real kernel fails the static tier: {real.get('error') or real['evidence'][:5]}")
            return False
        self.real_static = real
        spans = {target: statements((KERNEL_DIR / target).read_text()) for target in generate.TARGETS}
        self.reach = {}
        for m in self.mutants:
            variants, launch, decidable = reach(m, coverage, spans[m.target])
            self.reach[m.name] = variants, launch
            self.rows[m.name]["reach"] = {"variants": len(variants), "launch_digest": launch, "decidable": decidable}
        return True

    def _static_job(self, m):
        """(variants, job) of the prefilter for row ``m``, or None when it needs none now: a static confirmation
        compiles the one variant of its case (none for the source checks), anything else every variant it reaches."""
        row = self.rows[m.name]
        confirm = row.get("confirm")
        if row["prefilter"] is not None or m.name in equivalents.LISTED or confirm and confirm.get("held") \
                or confirm and "held" not in confirm and confirm["tier"] != STATIC:
            return None
        variants, launch = self.reach[m.name]
        if confirm and "held" not in confirm and confirm["case"] is not None:
            variants = [] if confirm["case"].get("variant") is None else [probe.variant_name(*confirm["case"]["variant"])]
        elif not variants and not launch and not (confirm and "held" not in confirm):
            row["prefilter"] = {"killed": False, "differs": False, "compiled": 0}
            return None
        folder = self.base / f"m{next(self.copies)}"
        return variants, {"name": m.name, "dir": str(_copy(m, folder)),
                          "variants": [list(k) for k in _variant_keys() if probe.variant_name(*k) in variants]}

    def prefilter(self):
        """Stage 2 over every row that needs it now (_static_job), BATCH mutants per worker; first the real kernel
        through every tier that calls route, so that a kernel failing one costs no mutant's compile."""
        jobs = [job for job in (self._static_job(m) for m in self.mutants) if job is not None]
        if not jobs or not self.real_tiers(self.runnable):
            return
        jobs.sort(key=lambda j: -len(j[0]))
        keys = [list(k) for k in _variant_keys()]
        real_check = {"name": "real", "dir": self.real_dir, "variants": [keys[0], keys[-1]]}
        count = -(-len(jobs) // BATCH)
        plans = [{"coverage": None, "mutants": [j for _, j in jobs[i::count]] + [real_check]} for i in range(count)]
        self.log(f"generated: prefilter of {len(jobs)} mutants, {count} batches, {self.jobs} workers at a time")
        started = time.perf_counter()
        with interrupts.ThreadPool(self.jobs) as pool:
            for future in concurrent.futures.as_completed([pool.submit(self._worker, plan) for plan in plans]):
                with self.lock:
                    self._absorb(future.result(), self.real_static)
                self.write()
        self.log(f"generated: prefilter done in {time.perf_counter() - started:.1f} s")

    def _absorb(self, lines, real):
        """A prefilter batch's lines into the rows (the real kernel's: checked against the first worker's). A static
        confirmation that no longer kills leaves the row for the whole prefilter."""
        for x in lines:
            if x["name"] == "real":
                if any(real["ptx_sha256"].get(k) != v for k, v in x.get("ptx_sha256", {}).items()) or \
                        x.get("launches_sha256") != real["launches_sha256"]:
                    self.failures.append("a prefilter worker's real kernel compiled to other digests than the first "
                                         f"worker's: the workers do not import their copies cleanly ({x.get('error')})")
                continue
            row = self.rows[x["name"]]
            confirm = row.get("confirm")
            if "error" in x:
                row["prefilter"] = {"killed": True, "not_viable": True, "evidence": [x["error"]], "compiled": 0,
                                    "case": None}
            else:
                ptx = {**real["ptx_sha256"], **x["ptx_sha256"]}
                launches = x["launches_sha256"] != real["launches_sha256"]
                row["prefilter"] = {"killed": x["killed"], "evidence": x["evidence"][:6], "raised": x["raised"][:6],
                                    "compiled": len(x["ptx_sha256"]), "seconds": x.get("seconds"), "case": x.get("case"),
                                    "differs": ptx != real["ptx_sha256"] or launches, "launches": launches,
                                    "variants": None if launches else
                                    sorted(k for k, v in ptx.items() if real["ptx_sha256"].get(k) != v)}
                row["refresh"]["compiled"] = row["refresh"].get("compiled", 0) + len(x["ptx_sha256"])
            if confirm and "held" not in confirm and confirm["tier"] == STATIC:
                confirm.update(held=bool(row["prefilter"]["killed"]), by_case=confirm["case"] is not None)
                if not confirm["held"]:
                    row["prefilter"] = None

    # ---- stage 3: the tiers that call route
    def classify(self, m):
        row = self.rows[m.name]
        pre = row["prefilter"]
        if m.name in equivalents.LISTED:
            row.update(verdict="equivalent", equivalence=equivalents.LISTED[m.name])
            return []
        if pre is None:
            return []
        if pre.get("killed"):  # a check that found a problem kills, whatever another check that raised could not read
            row.update(verdict="not_viable" if pre.get("not_viable") else "killed", killed_by=STATIC)
            return []
        decidable = row["reach"]["decidable"]
        if decidable and not pre.get("differs"):
            row.update(verdict="equivalent", equivalence=refresh.DIGEST_EQUIVALENCE)
            return []
        plan = tiers_after_prefilter(m, decidable, pre.get("differs"), pre.get("launches", False))
        if row["known_kill"] in plan:
            plan.remove(row["known_kill"])
            plan.insert(0, row["known_kill"])
        row["plan"] = plan
        return plan

    def real_tiers(self, used):
        """The real kernel through each tier of ``used`` not yet run (each must pass; its time sets the watchdog's);
        whether every one of them passes."""
        missing = [t for t in used if t not in self.real]
        if missing:
            real = runner._pool_run([(None, t, ()) for t in missing], len(missing), self.log)
            for (_, t), o in real.items():
                self.real[t] = {"passed": o.killed is False and not o.raised and not o.error,
                                "evidence": o.evidence[:6], "error": o.error}
                self.hang_s[t] = max(HANG_FLOOR_S, round(HANG_FACTOR * o.seconds))
                if not self.real[t]["passed"]:
                    self.failures.append(f"the real kernel fails the {t} tier: {o.error or o.evidence[:5]}")
        return all(self.real[t]["passed"] for t in used)

    def confirm(self, runnable):
        """CONFIRM of the tiers that call route: each mutant's detecting tier alone on its saved case (a
        differential case file replayed, the contract's part run alone; the real kernel must pass every case
        replayed, so no kill is vacuous), or, without a case, that tier whole. The verdict holds when the case
        kills again (without a case: when the tier ends the chain again); else the row is left for the prefilter
        and every tier."""
        work = [m for m in self.mutants if (self.rows[m.name].get("confirm") or {}).get("tier") in runnable
                and "held" not in self.rows[m.name]["confirm"]]
        used = sorted({self.rows[m.name]["confirm"]["tier"] for m in work})
        if not work or self.out_of_time() or not self.real_tiers(used):
            return
        replayed = [self.rows[m.name]["confirm"]["case"] for m in work
                    if self.rows[m.name]["confirm"]["tier"] == DIFFERENTIAL and self.rows[m.name]["confirm"]["case"]]
        if replayed:
            real = runner.run_probe(None, "replay", ["--case", *replayed])
            if real.error or real.killed or real.raised:
                self.failures.append(f"the real kernel mismatches saved killing cases: {real.error or real.evidence[:5]}")
                return
        self.log(f"generated: {len(work)} mutants confirmed by the tier that detected them ({used}), "
                 f"{sum(self.rows[m.name]['confirm']['case'] is not None for m in work)} by their saved case")

        def one(m):
            row = self.rows[m.name]
            tier, case = row["confirm"]["tier"], row["confirm"]["case"]
            if self.out_of_time():
                return
            if tier == DIFFERENTIAL and case is not None:
                outcome = self._run(m, "replay", ("--case", case), self.hang_s[DIFFERENTIAL])
                outcome["case"] = self._keep_case(m, DIFFERENTIAL, case)
            else:
                outcome = self._run(m, tier, self.probe_args(m, tier, case), self.hang_s[tier])
            held = bool(outcome["killed"]) if case is not None else _ends_chain(outcome)
            with self.lock:
                row["confirm"].update(held=held, by_case=case is not None and held)
                if held:
                    row["tiers"][tier], row["plan"] = outcome, [tier]
                else:
                    row["confirm"]["outcome"] = outcome
            self.log(f"  {m.name:60s} {tier:12s} {'confirmed' if held else 'not confirmed'}"
                     f"{' by its case' if case is not None else ''} {outcome['seconds']:6.1f} s")
            self.write()

        with interrupts.ThreadPool(max(1, self.jobs)) as pool:
            list(pool.map(one, work))
        self.write()

    def tiers(self, runnable):
        """Each mutant's planned tiers that ``runnable`` holds, in order, until one ends its chain; a resumed
        mutant whose chain an earlier run ended runs none."""
        if self.out_of_time():
            return
        chains = []
        for m in self.mutants:
            plan = [t for t in self.rows[m.name]["plan"] if t in runnable]
            if plan and not any(_ends_chain(self.rows[m.name]["tiers"].get(t, {})) for t in plan):
                chains.append((m, [t for t in plan if t not in self.rows[m.name]["tiers"]]))
        chains = [(m, plan) for m, plan in chains if plan]
        used = sorted({t for _, plan in chains for t in plan})
        if used and not self.real_tiers(used):
            return
        self.log(f"generated: {len(chains)} mutants through tiers {used}")
        with interrupts.ThreadPool(max(1, self.jobs)) as pool:
            list(pool.map(lambda chain: self._chain(*chain), chains))

    def probe_args(self, mutant, tier, case=None):
        """The probe's extra arguments: the committed known killer (runner.known_killers); a contract case
        (``case``: the part run alone); for the differential tier of a mutant the machine may decide (its lines in
        device code alone, its launches the real ones) the variants whose PTX differs, the only ones whose cases
        can differ."""
        args = runner.known_killers(mutant, tier)
        if tier in (CONTRACT_CPU, CONTRACT_GPU) and isinstance(case, dict) and case.get("part"):
            args += ("--part", case["part"])
        row = self.rows[mutant.name]
        differing = (row.get("prefilter") or {}).get("variants")
        if tier == DIFFERENTIAL and row["reach"]["decidable"] and differing:
            args += ("--variants", *differing)
        return args

    def _keep_case(self, mutant, tier, case):
        """A differential case file copied beside the record (freshness.cases_dir), named by the path the record
        keeps."""
        if tier != DIFFERENTIAL or not case or self.out is None or not Path(case).is_file():
            return case
        folder = freshness.cases_dir(self.out)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{mutant.name}.json"
        if Path(case).resolve() != target.resolve():
            shutil.copyfile(case, target)
        return shown(target)

    def _run(self, mutant, tier, args, seconds):
        """One tier on the mutant in a process the watchdog ends after ``seconds``; its outcome (a dict)."""
        o = runner.run_probe(mutant, tier, args, make_copy=functools.partial(_watched_copy, seconds=seconds))
        error = o.error
        if error and error.startswith(ENDED_BY_WATCHDOG):
            error = f"no verdict within {seconds} s: the watchdog ended the probe ({error})"
        return {"killed": o.killed, "evidence": o.evidence[:6], "raised": o.raised[:3],
                "case": self._keep_case(mutant, tier, o.case), "error": error, "seconds": round(o.seconds, 1)}

    def _probe(self, mutant, tier, args):
        """_run, its outcome recorded in the row and the record."""
        outcome = self._run(mutant, tier, args, self.hang_s[tier])
        with self.lock:
            self.rows[mutant.name]["tiers"][tier] = outcome
        state = "killed" if outcome["killed"] else "error" if outcome["error"] else "not killed"
        self.log(f"  {mutant.name:60s} {tier:12s} {state} {outcome['seconds']:6.1f} s")
        self.write()
        return outcome

    def _chain(self, mutant, plan):
        for tier in plan:
            if self.out_of_time():
                return
            if _ends_chain(self._probe(mutant, tier, self.probe_args(mutant, tier))):
                return


def _ends_chain(outcome):
    """Whether a tier's recorded outcome ends its mutant's chain of tiers: a kill, or a probe that gave no verdict
    (the mutant is crashed whatever a later tier says; a check that raised does not end it, a later tier may kill)."""
    return bool(outcome.get("killed") or outcome.get("error"))


def killing_case(row):
    """{"tier", "case"}: the case the tier that detected the row saved (properties/mutants/refresh.py re-runs it),
    or None when no tier did."""
    tier = row["killed_by"]
    if tier is None:
        return None
    outcome = (row["prefilter"] or {}) if tier == STATIC else row["tiers"].get(tier, {})
    return {"tier": tier, "case": outcome.get("case")}


def refresh_result(row):
    """What this run did for the row: "kept", "listed", "review", "by case" or "by its tier" (a confirmation that
    held), "reprobed" (the prefilter or a tier ran on it as a new mutant's would), or "not run"."""
    action, confirm = row["refresh"]["action"], row.get("confirm") or {}
    if action in (refresh.KEPT, refresh.LISTED, refresh.REVIEW):
        return action
    if confirm.get("held"):
        return "by case" if confirm.get("by_case") else "by its tier"
    ran = confirm.get("held") is False or row["refresh"].get("compiled") or row["tiers"] or row["prefilter"]
    return "reprobed" if ran else "not run"


def refresh_counts(rows, seconds, seed, earlier=None):
    """The refresh's wall time and counts: per action and result (refresh_result), the mutants the prefilter
    compiled and their variants, the mutants equivalent by digest, and the record it started from; a refresh that
    goes on from its own ``earlier`` calls (stopped at their time budget) counts them in: their seconds, their
    calls, and each row as the call that decided it."""
    results = {}
    for r in rows:
        results[r["refresh"]["result"]] = results.get(r["refresh"]["result"], 0) + 1
    actions = {}
    for r in rows:
        actions[r["refresh"]["action"]] = actions.get(r["refresh"]["action"], 0) + 1
    earlier = earlier or {"seconds": 0.0, "calls": 0}
    return {"seconds": round(seconds + earlier["seconds"], 1), "calls": earlier["calls"] + 1, "call_seconds": seconds,
            "seed": seed, "actions": actions, "results": results,
            "confirmed_by_case": results.get("by case", 0), "confirmed_by_tier": results.get("by its tier", 0),
            "reprobed": results.get("reprobed", 0),
            "recompiled": sum(bool(r["refresh"].get("compiled")) for r in rows),
            "variants_compiled": sum(r["refresh"].get("compiled", 0) for r in rows),
            "equivalent_by_digest": sum(r.get("equivalence") == refresh.DIGEST_EQUIVALENCE for r in rows)}


def prune_cases(data, out):
    """Remove from freshness.cases_dir(out) the case files no row of the complete record ``data`` names."""
    folder = freshness.cases_dir(out)
    named = {Path(r["case"]["case"]).name for r in data["mutants"]
             if r["case"] and isinstance(r["case"]["case"], str)}
    for path in folder.glob("*.json") if folder.is_dir() else ():
        if path.name not in named:
            path.unlink()


def settle(row):
    """A row's verdict from its plan's tier outcomes: killed by the first tier that saw it, crashed where a tier's
    probe raised, failed or was ended by the watchdog, survived when every planned tier ran and none did, not run
    while one is left; a verdict the prefilter or the equivalents list gave stands."""
    if row["verdict"] in DETECTED + ("equivalent",) or not row["plan"]:
        return
    outcomes = [row["tiers"].get(t, {}) for t in row["plan"]]
    killed = [t for t, o in zip(row["plan"], outcomes) if o.get("killed")]
    errors = [t for t, o in zip(row["plan"], outcomes) if o.get("error") or o.get("raised")]
    if killed:
        row.update(verdict="killed", killed_by=killed[0])
    elif errors:
        row.update(verdict="crashed", killed_by=errors[0])
    elif all(t in row["tiers"] for t in row["plan"]):
        row["verdict"] = "survived"
    else:
        row["verdict"] = "not_run"


def _variant_keys():
    """VARIANT_KEYS of the real kernel, read without importing it (the DSL) in this process."""
    tree = ast.parse((KERNEL_DIR / "routing.py").read_text())
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "KERNELS":
            values["KERNELS"] = ast.literal_eval(node.value)
    return tuple((metadata, renormalize, tokens) for metadata, tokens in values["KERNELS"]
                 for renormalize in (False, True))


def score(rows):
    """{"total", "by_function", "by_operator"}: sites, mutants, and each verdict's count."""
    def tally(group):
        counts = {"sites": len({(r["file"], r["line"], r["old"]) for r in group}), "mutants": len(group)}
        counts.update({v: sum(r["verdict"] == v for r in group) for v in VERDICTS})
        decided = counts["mutants"] - counts["equivalent"]
        counts["score"] = f"{sum(counts[v] for v in DETECTED)}/{decided}"
        return counts

    by_function, by_operator = {}, {}
    for r in rows:
        by_function.setdefault(f"{r['file']}:{r['function']}", []).append(r)
        by_operator.setdefault(r["operator"], []).append(r)
    return {"total": tally(rows), "by_function": {k: tally(v) for k, v in sorted(by_function.items())},
            "by_operator": {k: tally(v) for k, v in sorted(by_operator.items())}}


def run(only=(), tier="auto", jobs=None, out=DEFAULT_OUT, resume=None, log=print, seconds=None, reviewed=()):
    """Generate the set, run it, write ``out`` (unless None); the record. ``resume``: the record it refreshes
    (properties/mutants/refresh.py; ``reviewed``, the listed equivalents whose changed site a person reviewed).
    With ``seconds``, no batch or probe starts after that many seconds: the record says so, and a later run with
    ``resume`` goes on."""
    gpu = cuda_reason() is None
    tier = ("gpu" if gpu else "cpu") if tier == "auto" else tier
    if tier == "gpu" and not gpu:
        raise RuntimeError(f"--tier gpu: {cuda_reason()}")
    mutants = select(generate.generate(KERNEL_DIR), only)
    jobs = jobs or max(1, min(os.cpu_count() or 1, 16))
    this = Run(mutants, tier, out, resume, jobs, log, seconds, reviewed, only)
    log(f"generated: {len(mutants)} mutants, tier {tier}, {jobs} at a time")
    if not this.failures and this.coverage():
        this.prefilter()  # new and changed sites, equivalents by digest, static confirmations
        this.confirm(this.runnable)  # the confirmations of the tiers that call route
        this.prefilter()  # the rows whose confirmation did not hold
        if not this.failures:
            for m in mutants:
                this.classify(m)
            this.write()
            this.tiers(this.runnable)
        shutil.rmtree(this.base, ignore_errors=True)
    this.write()
    data = this.record()
    if out is not None and data["complete"]:
        prune_cases(data, out)
    counts = data["refresh"]
    log(f"generated: refresh: {counts['results']}; {counts['recompiled']} mutants recompiled "
        f"({counts['variants_compiled']} variants), {counts['equivalent_by_digest']} equivalent by digest")
    total = data["score"]["total"]
    log(f"generated: {data['verdict']}: {total['mutants']} mutants at {total['sites']} sites: {total['killed']} killed, "
        f"{total['not_viable']} not viable, {total['crashed']} crashed, {total['equivalent']} equivalent, "
        f"{total['survived']} survived, {total['not_run']} not run ({data['seconds']} s)" + (f"; record {out}" if out else ""))
    for failure in data["failures"]:
        log(f"FAIL: {failure}")
    if this.stopped:
        log(f"generated: stopped at the time budget ({seconds} s): run again with --resume {out} to go on")
    return data
