"""One kernel (a mutant's edited copy or the real kernel) through one tier, in a process of its own.

    python -m properties.mutants.probe static|differential|replay|contract-cpu|contract-gpu --kernel-dir DIR
                                       --result PATH --name NAME [--description TEXT] [--first-kill] [--case PATH ...]
                                       [--known PATH ...] [--variants NAME ...] [--part NAME]

Started by properties/mutants/runner.py (run_probe) with PYTHONPATH=<the copy's folder>:<repository>:<repository>/tests;
it first checks that ``kernel.routing`` is the copy in --kernel-dir. Writes {"killed": bool, "evidence":
[...], "raised": [...], "case": the killing case or null} to --result
(the case: a case file's path for differential, {"variant": key or null} for static, {"part": name} for the
contract tiers); a kernel that does not compile, or any other error, exits non-zero
with no result (the runner reports it: a mutant must be killed by a check, not by a broken edit).

static: every variant compiled for sm_90a through properties/codegen/checks.py (no GPU needed); with
--first-kill it stops at the first variant that fails a check (the PTX read before the cubin).
differential (GPU): first the saved cases of --known (a mutant's known killers: a mismatch there is the kill,
saved again with this kernel's outputs); else the adversarial row families in batches of b = 1..8, both
renormalize settings, scales cycling through SCALE_BITS, each batch also with metadata (tiles cycling through
TILES; local ranges of all experts, none of the picked ones, one picked expert, from the smallest pick on; then
the experts strictly between the two lowest picks, a pick just outside each end), against the NumPy model bit for
bit. With --variants, only the cases route launches on those variants. At the first mismatch the case is minimised
(one row, else the fewest rows; no metadata, else the smallest tile; scale 1.0; a zero bias; each step kept only
if the mismatch stays) and saved as a case file. A kernel call that raises (a mutant that faults the GPU) is
"raised", not a kill: the case that raised is saved unminimised (the context is gone) and named in ``raised``.
Likewise a static check that raises.
replay (GPU): the cases in --case; killed means the kernel's outputs differ from the model's on one of them.
contract-cpu, contract-gpu: the contract property (properties/contract/sweep.py: every targeted call, the
checked-call cache's twins, CONTRACT_EXAMPLES drawn calls, derandomized; on the CPU last, the targeted calls through
route's torch op on fake CUDA tensors) with CPU or CUDA tensors, or the part named by --part alone; killed means route treated a call otherwise than the contract's predicate says.
The static result also holds each variant's PTX digest and the digest of what route launches for each call shape,
so the generated run can tell a mutant that compiles to the real kernel and launches it alike.

Every case is a RoutingCase run through the engine (properties/engine/device.py: outputs poisoned in buffers
larger than the contract's, compared bit for bit); the minimal case is saved as a case file with the model's
outputs and the mutant's, recorded as "mutant:<name>", in SAVED_DIR (reports/mutants/, untracked: a run never
rewrites the committed corpus; `make mutants-corpus` copies them into CORPUS_DIR, corpora/mutants/, when a
person decides), so ``make replay CASE=corpora/mutants`` on the GPU shows every live implementation agreeing
and each recorded mutant differing (exit 1, like corpora/examples/).
"""

import argparse
import hashlib
import json
import sys
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS
from oracles.numpy_model import route as model_route
from common.provenance import REPO_ROOT
from properties.codegen import memcheck
from properties.engine import casefile
from properties.engine.cases import RoutingCase
from properties.engine.compare import describe as describe_disagreement
from properties.engine.compare import disagreements
from properties.engine.implementations import REGISTRY
from properties.engine.floats import f32
from properties.inputs.families import batches, families

CORPUS_DIR = casefile.CORPORA / "mutants"  # the committed minimal cases
SAVED_DIR = REPO_ROOT / "reports" / "mutants"  # where a run saves them
SCALE_BITS = (0x40200000, 0x3F800000, 0x00123456, 0x7F7FFFFF, 0x00000000)  # 2.5, 1, a subnormal, max, 0
TILES = (1, 2, 3, 4, 7, 8, 16, 100, 255, 256)
SIMPLE_SCALE = np.float32(1.0)
MISMATCH_LINES = 12
CONTRACT_EXAMPLES = 100
MUTANT_PREFIX = "mutant:"  # a mutant's outputs in a case file are recorded under "mutant:<name>"
GENERATOR_PREFIX = "adversarial rows: "


# ---------------------------------------------------------------------------------------------- on the GPU

@dataclass
class Run:
    """One call's result: mismatch lines (empty when bit-exact), and the error if the kernel raised."""

    lines: list
    error: str | None = None


def run_case(case):
    """Route ``case`` on fresh poisoned buffers with the imported kernel and compare with the model."""
    from properties.engine import device

    try:
        buffers = device.route(case)
    except Exception as exc:  # a mutant may fault the GPU: "raised", not a kill; the inputs are kept
        return Run([f"the kernel raised {type(exc).__name__}: {exc}"], repr(exc))
    return Run(buffers.mismatches())


def _local_requests(ids):
    """(offset, count): all experts, none of the picked ones (those below the smallest pick), one picked
    expert, the experts from the smallest pick on, and those from just above it (the smallest pick one
    expert below the range, the others inside it)."""
    lowest = int(ids.min())
    return (0, EXPERTS), (0, lowest), (int(ids[0, 0]), 1), (lowest, EXPERTS - lowest), \
        (lowest + 1, EXPERTS - lowest - 1)


def _between_picks(ids):
    """(offset, count): the experts strictly between the two lowest distinct picks, so that a pick sits just
    below the local range and one just past it (the range's two boundaries, each one expert off)."""
    low, high = np.unique(ids)[:2].tolist()
    return low + 1, high - low - 1


def case_plan(all_families, cut):
    """The differential sweep's cases, in order (b = 1 first, every family at each b)."""
    n = 0
    for b in range(1, MAX_TOKENS + 1):
        for family in all_families:
            for i, rows in enumerate(cut(family.rows, b)):
                generator = f"{GENERATOR_PREFIX}{family.name} b={b} batch {i}"
                ids = model_route(rows, family.bias, SIMPLE_SCALE, True)[0]
                for renormalize in (True, False):
                    scale = f32(SCALE_BITS[n % len(SCALE_BITS)])[()]
                    requests = _local_requests(ids)
                    offset, count = requests[n // len(TILES) % len(requests)]
                    plain = RoutingCase(np.ascontiguousarray(rows), family.bias, scale, renormalize, None, 0, 0,
                                        generator)
                    yield plain
                    yield replace(plain, tile_n=TILES[n % len(TILES)], local_expert_offset=offset,
                                  num_local_experts=count)
                    offset, count = _between_picks(ids)
                    yield replace(plain, tile_n=TILES[(n + 1) % len(TILES)], local_expert_offset=offset,
                                  num_local_experts=count)
                    n += 1


def _without_metadata(case):
    return replace(case, tile_n=None, local_expert_offset=0, num_local_experts=0)


def _metadata_trials(case):
    """Smaller tiles on the same local range, then all experts on the same tile."""
    trials = [replace(case, tile_n=tile) for tile in range(1, case.tile_n)]
    return trials + [replace(case, local_expert_offset=0, num_local_experts=EXPERTS)]


def minimise(case):
    """A smaller case that still mismatches (``case`` must), and the steps taken."""
    def fails(trial):
        return bool(run_case(trial).lines)

    steps = []
    singles = (case.with_rows([r], f"{case.generator} row {r}") for r in range(case.b))
    single = next((trial for trial in singles if case.b > 1 and fails(trial)), None)
    if single is not None:
        case = single
        steps.append(f"one row: {single.generator}")
    row = 0
    while case.b > 1 and row < case.b:
        trial = case.with_rows([r for r in range(case.b) if r != row], case.generator)
        if fails(trial):
            case = trial
            steps.append(f"dropped a row, {case.b} left")
        else:
            row += 1
    if case.has_metadata:
        if fails(_without_metadata(case)):
            case = _without_metadata(case)
            steps.append("no metadata")
        else:
            for trial in _metadata_trials(case):
                if not trial.same_inputs(case) and fails(trial):
                    case = trial
                    steps.append(f"metadata request tile_n={trial.tile_n} "
                                 f"local=[{trial.local_expert_offset}, +{trial.num_local_experts})")
                    break
    for field, value, step in (("scale", SIMPLE_SCALE, "scale 1.0"),
                               ("bias", np.zeros(EXPERTS, np.float32), "bias all zero")):
        trial = replace(case, **{field: value})
        if not trial.same_inputs(case) and fails(trial):
            case = trial
            steps.append(step)
    return case, steps


def save_case(name, description, case, run, first, tried, steps):
    """Write SAVED_DIR/<name>.json: the model's outputs and the mutant's (recorded as "mutant:<name>", through
    the registry's runner of the imported kernel), their disagreements, and how the case was found."""
    outputs = {"model": REGISTRY["model"].run(case)}
    origin = {"mutant": name, "description": description, "found_by": "python -m properties.mutants",
              "first": first, "cases_tried": tried, "minimised": steps, "mismatch": run.lines[:MISMATCH_LINES]}
    if run.error is None:
        outputs[MUTANT_PREFIX + name] = REGISTRY["cute"].run(case)
    else:
        origin["fault"] = run.error  # the device is gone: no outputs of the mutant to record
    found = disagreements(outputs, tile_n=case.tile_n)
    if run.error is None and not found:
        raise RuntimeError(f"{name}: the mismatch lies outside the buffers a case file records:\n"
                           + "\n".join(run.lines[:MISMATCH_LINES]))
    path = SAVED_DIR / f"{name}.json"
    casefile.write(path, casefile.CaseFile(case, outputs, casefile.recording(outputs), origin, found))
    return path


def known_kill(name, description, paths):
    """The first of the saved cases ``paths`` on which the imported kernel mismatches (a mutant's known killer:
    one compile of the variant it needs instead of the sweep's every variant), saved again with this kernel's
    outputs; None when none of them mismatches."""
    for path in paths:
        case = casefile.read(path).case
        run = run_case(case)
        if run.lines and run.error is None:
            saved = save_case(name, description, case, run, f"saved case {Path(path).name}", 1, [])
            evidence = [f"its saved case {Path(path).name} mismatches"] + run.lines[:MISMATCH_LINES]
            return {"killed": True, "evidence": evidence, "raised": [], "case": str(saved)}
    return None


def variant_of(case):
    """The name (variant_name) of the compiled variant route launches for ``case``, by the imported kernel."""
    from kernel import routing

    tokens = routing.kernel_tokens(case.has_metadata, case.b, case.tile_n or 0)
    return variant_name(case.has_metadata, case.renormalize, tokens)


def differential(name, description, known=(), variant_names=None):
    """The known killers first (``known``: saved case files); else sweep case_plan until the first mismatch,
    minimise it, save it, and check that the saved file reproduces it; when no case mismatches, the memcheck run
    (properties/codegen/memcheck.py) for what no output shows. With ``variant_names`` (variant_name's),
    sweep only the cases route launches on those: a mutant whose host code is the real kernel's and whose other
    variants compile to the real PTX gives the real outputs everywhere else."""
    from kernel import routing

    killed = known_kill(name, description, known)
    if killed is not None:
        return killed
    plan = case_plan(families(), batches)
    if variant_names is None:
        for renormalize in (True, False):
            routing.prepare(renormalize)
    else:
        plan = (case for case in plan if variant_of(case) in variant_names)
    tried = 0
    for case in plan:
        tried += 1
        run = run_case(case)
        if not run.lines:
            continue
        first = case.describe()
        steps = []
        if run.error is None:  # after a fault the context is gone: keep the case that faulted
            case, steps = minimise(case)
            run = run_case(case)
        path = save_case(name, description, case, run, first, tried, steps)
        if run.error is None and not replay_one(path)["killed"]:
            raise RuntimeError(f"{path}: the saved case does not reproduce the mismatch")
        if run.error is not None:
            return {"killed": False, "evidence": [], "raised": [f"case {tried} ({first}): {run.error}"],
                    "case": str(path)}
        evidence = [f"case {tried} ({first}) mismatches; minimal: {case.describe()}"] + run.lines[:MISMATCH_LINES]
        return {"killed": True, "evidence": evidence, "raised": [], "case": str(path)}
    if tried == 0:
        raise RuntimeError("the sweep compared no case: a run that compared nothing is no verdict")
    where = "" if variant_names is None else f" (the variants {', '.join(sorted(variant_names))})"
    out_of_bounds = memcheck.breaches()  # an access out of bounds that no output showed
    return {"killed": bool(out_of_bounds), "evidence": out_of_bounds or [f"{tried} cases bit-exact{where}", "memcheck: "
            "every access in bounds"], "raised": [], "case": None}


def replay_one(path):
    """The case in ``path`` on the imported kernel; RuntimeError when the model no longer gives the recorded
    model outputs (the case would then test something else)."""
    record = casefile.read(path)
    drift = disagreements({"model": REGISTRY["model"].run(record.case), "recorded model": record.outputs["model"]})
    if drift:
        raise RuntimeError(f"{path}: the model's outputs changed since the case was saved: "
                           + "; ".join(map(describe_disagreement, drift)))
    run = run_case(record.case)
    lines = [f"{Path(path).name}: {line}" for line in run.lines[:MISMATCH_LINES]]
    if run.error is not None:
        return {"killed": False, "evidence": [], "raised": lines}
    return {"killed": bool(run.lines), "evidence": lines, "raised": []}


def replay(paths):
    """Every case file on the imported kernel: killed when any of them mismatches (a raise is not a kill)."""
    results = [replay_one(path) for path in paths]
    return {"killed": any(r["killed"] for r in results), "evidence": [e for r in results for e in r["evidence"]],
            "raised": [e for r in results for e in r["raised"]], "case": None}


# ---------------------------------------------------------------------------------------------- static

def ptx_digest(ptx_text):
    """sha256 of the PTX without comments and debug lines (.file names the source's path)."""
    lines = [line for line in ptx_text.splitlines() if not line.lstrip().startswith((".loc", ".file", "//"))]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def launch_digest():
    """sha256 of what ``route`` launches for every call shape: the kernel (``kernel_tokens``) for each mode, b
    and tile, and the CTAs of the plain kernel for each b; host code, which no PTX shows."""
    from kernel import routing

    table = [[routing.kernel_tokens(metadata, rows, tile) for metadata in (False, True)
              for tile in range(1, MAX_TILE + 1)] + [routing.plain_ctas(rows)] for rows in range(1, MAX_TOKENS + 1)]
    return hashlib.sha256(json.dumps(table).encode()).hexdigest()


def _problems(checks, variant, where):
    """(problems the checks report, checks that raised): a check that cannot read the code is no kill."""
    evidence, raised = [], []
    for check, run_check in checks.items():
        try:
            evidence += [f"{where}: {check}: {problem}" for problem in run_check(variant)]
        except Exception as exc:  # reported as "raised": the mutant is not counted as killed by it
            raised.append(f"{where}: {check} raised {type(exc).__name__}: {exc}")
    return evidence, raised


def variant_name(metadata, renormalize, tokens):
    """How a static result names a variant (the key of its PTX digest)."""
    return f"metadata={metadata} renormalize={renormalize} tokens={tokens}"


def static(first_kill, variants=None):
    """properties/codegen/checks.py over every variant (``variants``: over those keys of VARIANT_KEYS alone);
    with ``first_kill``, stop at the first variant that fails a check (the PTX checks run before the cubin is
    disassembled)."""
    from properties.codegen import checks as codegen_checks

    evidence = codegen_checks.source_problems()
    raised, digests, killer = [], {}, None
    for metadata, renormalize, tokens in codegen_checks.VARIANTS:
        if variants is not None and (metadata, renormalize, tokens) not in variants:
            continue
        if evidence and first_kill:
            break
        variant = codegen_checks.compile_variant(metadata, renormalize, tokens)  # a compile error ends the probe
        where = variant_name(metadata, renormalize, tokens)
        digests[where] = ptx_digest(variant["ptx"])
        for checks in (codegen_checks.PTX_CHECKS, codegen_checks.CUBIN_CHECKS):
            if evidence and first_kill:
                break
            found, errors = _problems(checks, variant if checks is codegen_checks.PTX_CHECKS
                                      else codegen_checks.read_cubin(variant), where)
            evidence, raised = evidence + found, raised + errors
            if found and killer is None:
                killer = [metadata, renormalize, tokens]
    case = None if not evidence else {"variant": killer}  # variant None: the source checks found it
    return {"killed": bool(evidence), "evidence": evidence, "raised": raised, "case": case, "ptx_sha256": digests,
            "launches_sha256": launch_digest()}


# ---------------------------------------------------------------------------------------------- contract

def contract(cuda, part=None):
    """The contract property on the imported kernel: killed when any call departs from the predicate; the case
    is the part that breached ({"part": name}, properties/contract/sweep.py); with ``part`` (a saved case), that
    part alone."""
    from properties.contract import sweep

    breached, lines = sweep.run(cuda, CONTRACT_EXAMPLES, part)
    return {"killed": bool(lines), "evidence": lines, "raised": [], "case": breached and {"part": breached}}


# ---------------------------------------------------------------------------------------------- main

def _check_imported(kernel_dir):
    """The imported kernel must be the copy under test, never the repository's."""
    import kernel.routing

    imported = Path(kernel.routing.__file__).resolve().parent
    if imported != Path(kernel_dir).resolve():
        raise RuntimeError(f"imported kernel.routing from {imported}, expected the copy in {kernel_dir}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tier", choices=("static", "differential", "replay", "contract-cpu", "contract-gpu"))
    parser.add_argument("--kernel-dir", required=True)
    parser.add_argument("--result", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--description", default="")
    parser.add_argument("--case", nargs="*", default=(), help="replay: the case files")
    parser.add_argument("--known", nargs="*", default=(), help="differential: saved cases to try before the sweep")
    parser.add_argument("--first-kill", action="store_true", help="static: stop at the first variant that fails")
    parser.add_argument("--part", default=None, help="contract tiers: run this part of the property alone (a case)")
    parser.add_argument("--variants", nargs="+", default=None,
                        help="differential: sweep only the cases route launches on these variants (variant_name)")
    args = parser.parse_args(argv)
    _check_imported(args.kernel_dir)
    if args.variants is not None:
        from kernel import routing

        if args.tier != "differential":
            parser.error(f"--variants: only the differential tier takes it, not {args.tier}")
        unknown = sorted(set(args.variants) - {variant_name(*key) for key in routing.VARIANT_KEYS})
        if unknown:
            parser.error(f"--variants: no variant named {', '.join(map(repr, unknown))} (names such as "
                         f"{variant_name(*routing.VARIANT_KEYS[0])!r})")
    if args.part is not None and not args.tier.startswith("contract-"):
        parser.error(f"--part: only the contract tiers take it, not {args.tier}")
    try:
        if args.tier == "static":
            result = static(args.first_kill)
        elif args.tier == "differential":
            result = differential(args.name, args.description, args.known, args.variants)
        elif args.tier.startswith("contract-"):
            result = contract(args.tier == "contract-gpu", args.part)
        else:
            result = replay(args.case)
    except Exception:
        traceback.print_exc()
        return 2
    Path(args.result).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
