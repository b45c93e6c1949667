"""`make mutants`: edit the real kernel's source in known-wrong ways and show that `make verify`'s checks
catch every edit.

    python -m properties.mutants [--tier cpu|gpu|auto] [--only NAME ...] [--all] [--jobs N] [--report PATH]
    python -m properties.mutants replay [PATH ...]      (default: every file in corpora/mutants/)

A mutant is a list of exact source edits (old text -> new text) to kernel/routing.py or kernel/primitives.py.
Nothing is kept as a copy of the kernel: each mutant is made at run time by copying the ``kernel`` package
into a fresh folder, applying its edits (an edit whose old text does not occur exactly once stops the run:
a refactor of the kernel must not silently disarm a mutant), and running the checks in a subprocess whose
PYTHONPATH puts that folder first (the subprocess verifies that it imported the edited copy) with a DSL cache
of its own. The unedited kernel goes through the same path and must pass, so no kill is vacuous.

Tiers (properties/mutant_probe.py): "static" compiles every variant for sm_90a and runs
kernel/codegen_checks.py (any CPU); "differential" routes the adversarial row families on the GPU against the
NumPy model and, at the first mismatch, minimises the case and saves it to corpora/mutants/<mutant>.json (a
case file of properties/casefile.py, the mutant's outputs recorded as "mutant:<name>").
A mutant declares the tiers expected to kill it; every declared tier must kill it. ``--tier cpu`` runs the
static tier on the mutants that declare it (``--all``: on every mutant); ``--tier gpu`` runs both tiers on
every mutant. A mutant that no output can show (ex2's .ftz inside the sigmoid, an fma with a -0.0 addend) is
declared static only.

EQUIVALENT lists edits that look like bugs but cannot change the kernel, each with the reason; they are not
run and not counted, but their edits must still apply.
"""

import argparse
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

from properties import casefile
from properties.mutant_probe import CORPUS_DIR, ROOT

KERNEL_DIR = ROOT / "kernel"
DEFAULT_REPORT = ROOT / "reports" / "mutants.json"
WORK_ROOT = ROOT / "build" / "mutants"
TARGETS = ("routing.py", "primitives.py")
STATIC, DIFFERENTIAL = "static", "differential"
TIERS = (STATIC, DIFFERENTIAL)
PROBE_TIMEOUT_S = 900
LOG_TAIL = 4000


class MutantEditError(RuntimeError):
    """A mutant's edit does not apply exactly once to the current kernel source."""


@dataclass(frozen=True)
class Edit:
    """Replace ``old`` (which must occur exactly once) by ``new`` in kernel/<target>."""

    target: str
    old: str
    new: str


@dataclass(frozen=True)
class Mutant:
    name: str
    description: str
    edits: tuple
    kills: frozenset  # the tiers expected to kill it
    reason: str = ""  # for EQUIVALENT entries: why no check can tell it from the kernel
    same_ptx: bool = False  # for EQUIVALENT entries: it compiles to the real kernel's PTX


def _mutant(name, description, kills, *edits, reason="", same_ptx=False):
    return Mutant(name, description, tuple(Edit(*e) for e in edits), frozenset(kills), reason, same_ptx)


R, P = "routing.py", "primitives.py"
BOTH = (STATIC, DIFFERENTIAL)

CATALOG = (
    # ---- float arithmetic: primitives.py emits one instruction per function
    _mutant("ex2_ftz", "ex2.approx.ftz.f32 in place of ex2.approx.f32 (same outputs: 1 + e absorbs a subnormal e)",
            (STATIC,),
            (P, '_f32_asm("ex2.approx.f32", (a,), loc, ip)', '_f32_asm("ex2.approx.ftz.f32", (a,), loc, ip)')),
    _mutant("div_rn", "div.rn.f32 (IEEE division) in place of div.full.f32", BOTH,
            (P, '_f32_asm("div.full.f32", (a, b), loc, ip)', '_f32_asm("div.rn.f32", (a, b), loc, ip)')),
    _mutant("rcp_then_mul", "a / b as rcp.approx.ftz.f32 then mul.f32: no range scaling (sigmoid of g < -87.3)", BOTH,
            (P, '_f32_asm("div.full.f32", (a, b), loc, ip)',
             '_f32_asm("mul.f32", (a, _f32_asm("rcp.approx.ftz.f32", (b,), loc, ip)), loc, ip)')),
    _mutant("fma_contracted", "every mul.f32 contracted to fma.rn.f32 a, b, -0.0 (the same value for every input)",
            (STATIC,),
            (P, '_f32_asm("mul.f32", (a, b), loc, ip)', '_f32_asm("fma.rn.f32", (a, b, Imm(0x80000000)), loc, ip)')),
    _mutant("sigmoid_folded", "sigmoid's (0 - x) * log2e folded to x * -log2e as Triton 3.9 emits (same outputs)",
            (STATIC,), (R, "t = mul_f32(sub_f32(ZERO, x), LOG2E)", "t = mul_f32(x, Imm(0xBFB8AA3B))")),
    _mutant("sum_from_first_pick", "total starts at s_0 instead of 0.0 + s_0 (same outputs: s_0 is never -0.0)",
            (STATIC,), (R, "total = add_f32(ZERO, picked[0])", "total = picked[0]")),
    _mutant("sum_reversed", "total summed from the 8th pick down to the 1st", (DIFFERENTIAL,),
            (R, "total = add_f32(ZERO, picked[0])\n    for s in picked[1:]:",
             "total = add_f32(ZERO, picked[-1])\n    for s in picked[-2::-1]:")),
    _mutant("eps_1e-20", "renormalization eps float32(1e-20) in place of float32(1e-15)", BOTH,
            (R, "RENORM_EPS = Imm(0x26901D7D)  # float32(1e-15)", "RENORM_EPS = Imm(0x1E3CE508)  # float32(1e-20)")),
    _mutant("unscaled_weights", "renormalize=False weights are s, not s * scale", BOTH,
            (R, "return mul_f32(score, scale)", "return score")),
    _mutant("bias_in_weights", "the weights take c = s + bias instead of s (ptxas then fuses div.full's FMUL and "
            "the bias add: an FFMA)", BOTH,
            (R, "_store_scores(region + first * WORD_BYTES, scores)",
             "_store_scores(region + first * WORD_BYTES, corrected)")),
    # ---- selection
    _mutant("ties_highest_lane", "among equal keys the highest lane wins (not the lowest)", (DIFFERENTIAL,),
            (R, "winner = Int32(cute.arch.bfind(holders & (Uint32(0) - holders)))",
             "winner = Int32(cute.arch.bfind(holders))"),
            (R, "below = cute.arch.lanemask_lt()\n    for k in range(TOP_K):",
             "below = cute.arch.lanemask_gt()\n    for k in range(TOP_K):")),
    _mutant("ties_highest_slot", "among a lane's equal keys the highest expert wins", (DIFFERENTIAL,),
            (R, "Uint64(address + (SLOT_MASK - j) * WORD_BYTES)", "Uint64(address + j * WORD_BYTES)"),
            (R, "reversed_scores = scores[::-1]", "reversed_scores = scores"),
            (R, "expert = ((address - region) >> WORD_SHIFT) ^ SLOT_MASK",
             "expert = (address - region) >> WORD_SHIFT")),
    _mutant("negative_keys_unmirrored", "negative c keyed by its bits unmirrored: -2 ranks above -1, -inf above all "
            "(LLVM emits the sign flip as neg.f32)", BOTH,
            (R, "flip = (Uint32(0) - (bits >> 31)) | Uint32(SIGN_BIT)", "flip = Uint32(SIGN_BIT)")),
    _mutant("every_holder_pops", "every lane holding the best key pops its head, not only the winner", (DIFFERENTIAL,),
            (R, "won = (key == best) & ((holders & below) == 0)", "won = key == best")),
    _mutant("sort_missing_comparator", "the lane's sorting network without its last comparator (5, 6)",
            (DIFFERENTIAL,), (R, "for i, j in SORT8:", "for i, j in SORT8[:-1]:")),
    # ---- metadata
    _mutant("cta_limit_off_by_one", "a CTA's row limit one past its expert's last row", (DIFFERENTIAL,),
            (R, "cutlass.min((cta + 1) * tile_n, first_row + count)",
             "cutlass.min((cta + 1) * tile_n, first_row + count + 1)")),
    _mutant("padding_unwritten", "the padding rows of each expert's last CTA left unwritten (not -1)", (DIFFERENTIAL,),
            (R, "            self.write_padding(mMeta, META_PERMUTED_TO_TOKEN + first_row + count,\n"
                "                               META_PERMUTED_TO_TOKEN + (first + ctas) * tile_n)\n", "")),
    _mutant("foreign_route_zero", "a route to another rank's expert mapped to row 0 instead of -1", (DIFFERENTIAL,),
            (R, "mMeta[META_EXPANDED_TO_PERMUTED + warp * TOP_K + lane] = Int32(PADDING)",
             "mMeta[META_EXPANDED_TO_PERMUTED + warp * TOP_K + lane] = Int32(0)")),
    _mutant("local_range_inclusive", "the expert just past the local range counted as local in the route rows",
            (DIFFERENTIAL,), (R, "if local >= 0 and local < num_local:\n                        cute.arch.atomic_or",
                              "if local >= 0 and local <= num_local:\n                        cute.arch.atomic_or")),
    _mutant("route_rows_off_by_one", "one route row past the last token's written (-1 past the routes)",
            (DIFFERENTIAL,), (R, "if lane < TOP_K:", "if lane <= TOP_K:")),
    # ---- programmatic dependent launch
    _mutant("logits_before_wait", "without metadata the row is routed (logits loaded) before griddepcontrol.wait",
            (STATIC,),
            (R, "cute.arch.griddepcontrol_wait()\n"
                "                _route_row(mLogits, mIds, mWeights, sScores, bias, warp, lane, scale, "
                "self.renormalize)\n",
             "_route_row(mLogits, mIds, mWeights, sScores, bias, warp, lane, scale, self.renormalize)\n"
             "                cute.arch.griddepcontrol_wait()\n")),
    _mutant("bias_after_wait", "with metadata the bias is loaded after griddepcontrol.wait", (STATIC,),
            (R, "            bias = _load_lane(bias_address)\n"
                "            # Every route word is zero before any is set: a barrier, before the wait.\n"
                "            cute.arch.sync_threads()\n"
                "            # Every thread writes global memory, so every thread waits for the preceding grid.\n"
                "            cute.arch.griddepcontrol_wait()\n",
             "            cute.arch.sync_threads()\n            cute.arch.griddepcontrol_wait()\n"
             "            bias = _load_lane(bias_address)\n")),
    _mutant("branch_after_wait", "without metadata, warps past the last row leave after the wait (a branch)",
            (STATIC,), (R, "            if warp < rows:\n                bias = _load_lane(bias_address)\n"
                           "                cute.arch.griddepcontrol_wait()\n",
                        "            bias = _load_lane(bias_address)\n            cute.arch.griddepcontrol_wait()\n"
                        "            if warp < rows:\n")),
)

EQUIVALENT = (
    _mutant("neg_zero_as_pos_zero", "-0.0 keyed as +0.0 (the canonicalisation the kernel leaves out)", (),
            (R, "    bits = c.bitcast(Uint32)\n",
             "    bits = c.bitcast(Uint32)\n    bits = _select(bits == Uint32(SIGN_BIT), Uint32(0), bits)\n"),
            reason="c = s + bias is never -0.0: s >= +0.0 and a round-to-nearest add gives -0.0 only for "
                   "(-0.0) + (-0.0)"),
    _mutant("popped_slot_neg_inf", "a popped slot keyed as -inf instead of 0", (),
            (R, "[_select(won, Uint64(0), words[-1])]", "[_select(won, Uint64(0x007FFFFF << KEY_SHIFT), words[-1])]"),
            reason="a lane pops at most 7 times (TOP_K - 1) and holds 8 words, so a popped slot never reaches the "
                   "head: the value is dead, and the compiler drops it (the PTX is the real kernel's)", same_ptx=True),
)


# ---------------------------------------------------------------------------------------------- making a mutant

def mutated_sources(mutant):
    """{target file name: edited text}; MutantEditError unless every old text occurs exactly once."""
    texts = {}
    for edit in mutant.edits:
        if edit.target not in TARGETS:
            raise MutantEditError(f"mutant {mutant.name}: target {edit.target!r} is not one of {TARGETS}")
        text = texts.get(edit.target) or (KERNEL_DIR / edit.target).read_text()
        count = text.count(edit.old)
        if count != 1:
            raise MutantEditError(f"mutant {mutant.name}: its edit of kernel/{edit.target} expects this text exactly "
                                  f"once, found {count} times (was the kernel refactored? update the catalog):\n"
                                  f"{edit.old}")
        texts[edit.target] = text.replace(edit.old, edit.new)
    return texts


def check_catalog(mutants=CATALOG + EQUIVALENT):
    """Every name unique, every declared tier known, every edit applying exactly once (MutantEditError)."""
    names = [m.name for m in mutants]
    if len(set(names)) != len(names):
        raise MutantEditError(f"duplicate mutant names in {names}")
    for mutant in mutants:
        if not mutant.kills <= set(TIERS) or (not mutant.kills and not mutant.reason):
            raise MutantEditError(f"mutant {mutant.name}: kills {set(mutant.kills)} must name tiers of {TIERS}")
        mutated_sources(mutant)


def materialise(mutant, folder):
    """folder/kernel: a copy of the kernel package with the mutant's edits (None: unedited)."""
    shutil.copytree(KERNEL_DIR, folder / "kernel", ignore=shutil.ignore_patterns("__pycache__"))
    if mutant is not None:
        for target, text in mutated_sources(mutant).items():
            (folder / "kernel" / target).write_text(text)
    return folder / "kernel"


# ---------------------------------------------------------------------------------------------- running one

@dataclass
class Outcome:
    """One tier's verdict on one kernel (a mutant or the real one)."""

    tier: str
    killed: bool | None = None  # None: the probe failed to give a verdict (an error)
    evidence: list = field(default_factory=list)
    case: str | None = None
    error: str | None = None
    seconds: float = 0.0
    ptx: dict | None = None  # static tier: sha256 of each variant's PTX


def _probe_env(folder):
    """The copy first, then the repository and its tests; an inherited PYTHONPATH last (it may hold the DSL's
    packages)."""
    env = dict(os.environ)
    inherited = [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(ROOT), str(ROOT / "tests")] + inherited)
    env["CUTE_DSL_CACHE_DIR"] = str(folder / "cute-cache")
    env["CUTE_DSL_NO_CACHE"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_probe(mutant, tier, extra=()):
    """Run tier ``tier`` on the mutant (None: the real kernel) in a subprocess; its Outcome."""
    name = mutant.name if mutant else "real"
    WORK_ROOT.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix=f"{name}-{tier}-", dir=WORK_ROOT))
    try:
        kernel_dir = materialise(mutant, folder)
        result, log = folder / "result.json", folder / "probe.log"
        cmd = [sys.executable, "-m", "properties.mutant_probe", tier, "--kernel-dir", str(kernel_dir),
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
            return Outcome(tier, data["killed"], data["evidence"], data.get("case"), None,
                           time.perf_counter() - started, data.get("ptx_sha256"))
        return Outcome(tier, None, [], None, f"probe exit {rc}; log tail:\n{log.read_text()[-LOG_TAIL:]}",
                       time.perf_counter() - started)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- the run

def _gpu_available():
    import torch

    return torch.cuda.is_available()


def plan(mutants, tiers, all_static):
    """(mutant or None for the real kernel, tier) jobs: the real kernel under every tier; each mutant under
    every tier when the GPU tier runs, else under the static tier where it declares it (or ``all_static``)."""
    jobs = [(None, tier) for tier in tiers]
    for mutant in mutants:
        for tier in tiers:
            if DIFFERENTIAL in tiers or all_static or tier in mutant.kills:
                jobs.append((mutant, tier))
    return jobs


def verdicts(mutants, tiers, outcomes):
    """(failures, rows): a failure for every error, every real-kernel kill, every declared tier (that ran)
    which missed its mutant, every mutant that compiles to the real kernel's PTX, and every mutant no tier
    killed when all tiers ran."""
    failures, rows = [], []
    for tier in tiers:
        real = outcomes[("real", tier)]
        if real.error or real.killed:
            failures.append(f"the real kernel fails the {tier} tier: {real.error or real.evidence[:5]}")
    real_ptx = outcomes[("real", STATIC)].ptx if ("real", STATIC) in outcomes else None
    for mutant in mutants:
        ran = {tier: outcomes[(mutant.name, tier)] for tier in tiers if (mutant.name, tier) in outcomes}
        failures += [f"{mutant.name} ({tier}): {o.error}" for tier, o in ran.items() if o.error]
        missed = [tier for tier in sorted(mutant.kills) if tier in ran and ran[tier].killed is False]
        if missed:
            failures.append(f"{mutant.name}: declared killed by {missed}, which did not kill it")
        if real_ptx and STATIC in ran and ran[STATIC].ptx == real_ptx:
            failures.append(f"{mutant.name}: compiles to the real kernel's PTX, so nothing can kill it (equivalent)")
        killed_by = [tier for tier, o in ran.items() if o.killed]
        if set(TIERS) <= set(tiers) and not killed_by:
            failures.append(f"{mutant.name}: survived every tier")
        rows.append({"mutant": mutant.name, "description": mutant.description,
                     "expected": [t for t in TIERS if t in mutant.kills],
                     "killed_by": killed_by, "not_killed_by": [t for t, o in ran.items() if o.killed is False],
                     "not_run": [t for t in TIERS if t not in ran],
                     "case": next((o.case for o in ran.values() if o.case), None),
                     "evidence": {t: o.evidence[:6] for t, o in ran.items()},
                     "seconds": {t: round(o.seconds, 1) for t, o in ran.items()}})
    return failures, rows


def table(rows):
    """The kill table in Markdown."""
    lines = ["| mutant | what it breaks | expected | killed by | minimal case |", "|---|---|---|---|---|"]
    for row in rows:
        killed = ", ".join(t if t in row["expected"] else f"{t} (unexpected)" for t in row["killed_by"]) \
            or ("not yet" if row["not_run"] else "**survived**")
        if row["not_run"]:
            killed += f" ({', '.join(row['not_run'])} not run)"
        case = Path(row["case"]).name if row["case"] else ""
        lines.append(f"| {row['mutant']} | {row['description']} | {', '.join(row['expected'])} | {killed} | {case} |")
    return "\n".join(lines)


def _pool_run(work, jobs, log):
    """{(name, tier): Outcome} of run_probe over ``work`` [(mutant or None, tier, extra args)], ``jobs`` at a time."""
    outcomes = {}
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(run_probe, mutant, tier, extra): (mutant.name if mutant else "real", tier)
                   for mutant, tier, extra in work}
        for future in concurrent.futures.as_completed(futures):
            key, outcome = futures[future], future.result()
            outcomes[key] = outcome
            state = "error" if outcome.error else ("killed" if outcome.killed else "not killed")
            log(f"  {key[0]:26s} {key[1]:12s} {state:10s} {outcome.seconds:6.1f} s"
                + (f"  {outcome.evidence[0].splitlines()[0][:100]}" if outcome.evidence else ""))
    return outcomes


def _jobs(jobs, work):
    return jobs or max(1, min(len(work), os.cpu_count() or 1, 8))


def run(tier="auto", only=(), all_static=False, jobs=None, report=DEFAULT_REPORT, log=print):
    """Run the catalog; writes ``report`` (unless None) and returns its record (``verdict`` PASS or FAIL).
    With the GPU tier, the saved minimal cases are then replayed on the real kernel, which must match."""
    check_catalog()
    gpu = _gpu_available()
    if tier == "auto":
        tier = "gpu" if gpu else "cpu"
    if tier == "gpu" and not gpu:
        raise RuntimeError("--tier gpu: no CUDA device here (torch.cuda.is_available() is False)")
    tiers = TIERS if tier == "gpu" else (STATIC,)
    unknown = set(only) - {m.name for m in CATALOG}
    if unknown:
        raise ValueError(f"--only: no mutant named {sorted(unknown)}; the catalog has {[m.name for m in CATALOG]}")
    mutants = [m for m in CATALOG if not only or m.name in only]
    work = [(mutant, t, ()) for mutant, t in plan(mutants, tiers, all_static)]
    jobs = _jobs(jobs, work)
    log(f"mutants: {len(mutants)} mutants + the real kernel, tiers {list(tiers)}, {len(work)} probes, {jobs} at a time")
    started = time.perf_counter()
    outcomes = _pool_run(work, jobs, log)
    failures, rows = verdicts(mutants, tiers, outcomes)
    cases = [row["case"] for row in rows if row["case"]]
    if DIFFERENTIAL in tiers and cases:
        real = run_probe(None, "replay", ["--case", *cases])
        if real.error or real.killed:
            failures.append(f"the real kernel mismatches saved minimal cases: {real.error or real.evidence[:5]}")
    record = {"verdict": "FAIL" if failures else "PASS", "tier": tier, "tiers_run": list(tiers),
              "seconds": round(time.perf_counter() - started, 1), "failures": failures,
              "real": {t: {"passed": outcomes[("real", t)].killed is False, "error": outcomes[("real", t)].error,
                           "evidence": outcomes[("real", t)].evidence[:6]} for t in tiers},
              "mutants": rows,
              "equivalent": [{"mutant": m.name, "description": m.description, "reason": m.reason} for m in EQUIVALENT],
              "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
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


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["replay"]:
        paths = argv[1:] or sorted(map(str, CORPUS_DIR.glob("*.json")))
        return 0 if replay(paths) else 1
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", choices=("cpu", "gpu", "auto"), default="auto")
    parser.add_argument("--only", nargs="*", default=(), help="run only these mutants")
    parser.add_argument("--all", action="store_true", help="CPU tier: run the static checks on every mutant")
    parser.add_argument("--jobs", type=int, default=None, help="probes at a time (default: cores, at most 8)")
    parser.add_argument("--report", default=str(DEFAULT_REPORT))
    args = parser.parse_args(argv)
    record = run(args.tier, args.only, args.all, args.jobs, args.report)
    return 0 if record["verdict"] == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
