"""One kernel (a mutant's edited copy or the real kernel) through one tier, in a process of its own.

    python -m properties.mutant_probe static|differential|replay --kernel-dir DIR --result PATH --name NAME
                                      [--description TEXT] [--first-kill] [--case PATH ...]

Started by properties.mutants with PYTHONPATH=<the copy's folder>:<repository>:<repository>/tests; it first
checks that ``kernel.routing`` is the copy in --kernel-dir. Writes {"killed": bool, "evidence": [...],
"case": path or null} to --result; a kernel that does not compile, or any other error, exits non-zero with
no result (the runner reports it: a mutant must be killed by a check, not by a broken edit).

static: every variant compiled for sm_90a through kernel/codegen_checks.py (no GPU needed); with
--first-kill it stops at the first variant that fails a check (the PTX read before the cubin).
differential (GPU): the adversarial row families in batches of b = 1..8, both renormalize settings, scales
cycling through SCALES, each batch also with metadata (tiles cycling through TILES; local ranges of all
experts, none of the picked ones, one picked expert, from the smallest pick on), against the NumPy model bit
for bit. At the first mismatch the case is minimised (one row, else the fewest rows; no metadata, else the
smallest tile; scale 1.0; a zero bias; each step kept only if the mismatch stays) and saved as a case file.
A mutant that faults the GPU is killed by the case that faulted (saved unminimised: the context is gone).
replay (GPU): the cases in --case; killed means the kernel's outputs differ from the model's on one of them.
The static result also holds each variant's PTX digest, so the runner can tell a mutant that compiles to the
real kernel.

Case files (``musespark-mutant-case/1``, self-contained JSON): inputs as 8-hex-digit bit patterns (scale
too), outputs as the poisoned buffers read after the call (ids and weights: all MAX_TOKENS rows, so a write
past row b shows; metadata: the whole vector with its slack), for the kernel and for the model. A word
followed by ``*n`` stands for n copies.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from kernel.layout import EXPERTS, MAX_TOKENS

FORMAT = "musespark-mutant-case/1"
ROOT = Path(__file__).resolve().parents[1]
CORPUS_DIR = ROOT / "corpora" / "mutants"
SCALE_BITS = (0x40200000, 0x3F800000, 0x00123456, 0x7F7FFFFF, 0x00000000)  # 2.5, 1, a subnormal, max, 0
TILES = (1, 2, 3, 4, 7, 8, 16, 100, 255, 256)
SIMPLE_SCALE = 1.0
MISMATCH_LINES = 12
DEVICE = "cuda"


def f32(bits):
    return float(np.uint32(bits).view(np.float32))


SCALES = tuple(f32(b) for b in SCALE_BITS)


# ---------------------------------------------------------------------------------------------- case files

def encode_words(words):
    """8-hex-digit words separated by spaces, a run of equal words as ``word*count``."""
    words = np.asarray(words).astype(np.int64).reshape(-1) & 0xFFFFFFFF
    out, start = [], 0
    while start < words.size:
        end = start
        while end + 1 < words.size and words[end + 1] == words[start]:
            end += 1
        out.append(f"{int(words[start]):08x}" + (f"*{end - start + 1}" if end > start else ""))
        start = end + 1
    return " ".join(out)


def decode_words(text):
    """The uint32 words ``encode_words`` wrote."""
    words = []
    for token in text.split():
        word, _, count = token.partition("*")
        words += [int(word, 16)] * (int(count) if count else 1)
    return np.array(words, np.uint32)


def _floats(text):
    return decode_words(text).view(np.float32)


@dataclass(frozen=True)
class Case:
    """One routing call: logits rows [b, 256], bias [256], scale, renormalize, metadata request or None."""

    label: str
    rows: np.ndarray
    bias: np.ndarray
    scale: float
    renormalize: bool
    local: object  # kernel.check.Local or None

    def inputs(self):
        local = self.local
        return {"logits": [encode_words(row.view(np.uint32)) for row in self.rows],
                "bias": encode_words(self.bias.view(np.uint32)),
                "scale": encode_words(np.float32(self.scale).view(np.uint32).reshape(1)),
                "renormalize": self.renormalize, "tile_n": local.tile if local else None,
                "local_expert_offset": local.offset if local else 0, "num_local_experts": local.count if local else 0}


def case_from_inputs(inputs, label):
    from kernel.check import Local

    rows = np.stack([_floats(row) for row in inputs["logits"]])
    if rows.ndim != 2 or rows.shape[1] != EXPERTS or not 1 <= len(rows) <= MAX_TOKENS:
        raise ValueError(f"case file: logits must be 1..{MAX_TOKENS} rows of {EXPERTS} words, got {rows.shape}")
    local = None
    if inputs["tile_n"] is not None:
        local = Local(inputs["local_expert_offset"], inputs["num_local_experts"], inputs["tile_n"])
    return Case(label, rows, _floats(inputs["bias"]), float(_floats(inputs["scale"])[0]), inputs["renormalize"],
                local)


def _outputs(ids, weight_bits, metadata):
    return {"ids": [encode_words(row) for row in ids], "weights": [encode_words(row) for row in weight_bits],
            "metadata": None if metadata is None else encode_words(metadata)}


def decode_outputs(out):
    """(ids int32 [8, 8], weight bits int32 [8, 8], metadata int32 or None) of a case file's outputs entry."""
    ids = np.stack([decode_words(row) for row in out["ids"]]).view(np.int32)
    weights = np.stack([decode_words(row) for row in out["weights"]]).view(np.int32)
    return ids, weights, None if out["metadata"] is None else decode_words(out["metadata"]).view(np.int32)


def read_case(path):
    """(case file dict, Case); ValueError when it is not a mutant case file."""
    data = json.loads(Path(path).read_text())
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a {FORMAT} file (format {data.get('format')!r})")
    return data, case_from_inputs(data["inputs"], data["found"]["minimal"])


def _commit():
    if os.environ.get("GIT_COMMIT"):
        return os.environ["GIT_COMMIT"]
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _environment():
    import torch

    try:
        gpu = torch.cuda.get_device_name()
    except RuntimeError as exc:  # after a mutant faulted the device
        gpu = f"unknown ({exc})"
    return {"gpu": gpu, "torch": torch.__version__, "commit": _commit(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


# ---------------------------------------------------------------------------------------------- on the GPU

@dataclass
class Run:
    """One call's result: mismatch lines (empty when bit-exact), the buffers read back, the model's."""

    lines: list
    got: tuple
    want: tuple
    error: str | None = None


def _synchronize():
    import torch

    torch.cuda.synchronize()


def run_case(case):
    """Route ``case`` on fresh poisoned buffers with the imported kernel and compare with the model."""
    import torch

    from kernel import check

    want = check.expected(case.rows, case.bias, case.scale, case.renormalize, case.local)
    buffers = check.make_buffers(case.rows, case.bias, case.local, DEVICE)
    try:
        check.call_route(buffers, case.scale, case.renormalize, case.local)
        _synchronize()
    except Exception as exc:  # a mutant may fault the GPU: that is a detection, with the inputs that did it
        return Run([f"the kernel raised {type(exc).__name__}: {exc}"], (None, None, None), want, repr(exc))
    lines = check.compare(buffers, want, case.local.tile if case.local else 0)
    metadata = None if buffers.metadata_all is None else buffers.metadata_all.cpu().numpy()
    got = (buffers.ids_all.cpu().numpy(), buffers.weights_all.view(torch.int32).cpu().numpy(), metadata)
    return Run(lines, got, want)


def _local_requests(ids, tile):
    """All experts, none of the picked ones (those below the smallest pick), one picked expert, and the
    experts from the smallest pick on."""
    from kernel.check import Local

    lowest = int(ids.min())
    return (Local(0, EXPERTS, tile), Local(0, lowest, tile), Local(int(ids[0, 0]), 1, tile),
            Local(lowest, EXPERTS - lowest, tile))


def case_plan(families, batches):
    """The differential sweep's cases, in order (b = 1 first, every family at each b)."""
    from oracles.numpy_model import route as model_route

    n = 0
    for b in range(1, MAX_TOKENS + 1):
        for family in families:
            for i, rows in enumerate(batches(family.rows, b)):
                label = f"{family.name} b={b} batch {i}"
                ids = model_route(rows, family.bias, SIMPLE_SCALE, True)[0]
                for renormalize in (True, False):
                    scale = SCALES[n % len(SCALES)]
                    requests = _local_requests(ids, TILES[n % len(TILES)])
                    yield Case(label, rows, family.bias, scale, renormalize, None)
                    yield Case(label, rows, family.bias, scale, renormalize, requests[n // len(TILES) % len(requests)])
                    n += 1


def minimise(case):
    """A smaller case that still mismatches (``case`` must), and the steps taken."""
    from kernel.check import Local

    def fails(trial):
        return bool(run_case(trial).lines)

    steps = []
    singles = (replace(case, rows=case.rows[r:r + 1], label=f"{case.label} row {r}") for r in range(len(case.rows)))
    single = next((trial for trial in singles if len(case.rows) > 1 and fails(trial)), None)
    if single is not None:
        case = single
        steps.append(f"one row: {single.label}")
    row = 0
    while len(case.rows) > 1 and row < len(case.rows):
        trial = replace(case, rows=np.delete(case.rows, row, axis=0))
        if fails(trial):
            case = trial
            steps.append(f"dropped a row, {len(case.rows)} left")
        else:
            row += 1
    local = case.local
    if local is not None:
        if fails(replace(case, local=None)):
            case = replace(case, local=None)
            steps.append("no metadata")
        else:
            for trial in [Local(local.offset, local.count, tile) for tile in range(1, local.tile)] + \
                         [Local(0, EXPERTS, local.tile)]:
                if trial != local and fails(replace(case, local=trial)):
                    case = replace(case, local=trial)
                    steps.append(f"metadata request {trial}")
                    break
    for field, value in (("scale", SIMPLE_SCALE), ("bias", np.zeros(EXPERTS, np.float32))):
        trial = replace(case, **{field: value})
        if not np.array_equal(np.asarray(getattr(case, field)), np.asarray(value)) and fails(trial):
            case = trial
            steps.append(f"{field} {'1.0' if field == 'scale' else 'all zero'}")
    return case, steps


def save_case(name, description, case, run, first, tried, steps):
    """Write corpora/mutants/<name>.json; returns its path."""
    CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    path = CORPUS_DIR / f"{name}.json"
    record = {"format": FORMAT, "mutant": name, "description": description, "inputs": case.inputs(),
              "outputs": {"kernel": _outputs(*run.got) if run.error is None else {"error": run.error},
                          "model": _outputs(*run.want)},
              "mismatch": run.lines[:MISMATCH_LINES],
              "found": {"first": first, "cases_tried": tried, "minimised": steps, "minimal": case.label},
              "recorded": _environment()}
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def differential(name, description):
    """Sweep case_plan until the first mismatch; minimise it, save it, and check that the saved file
    reproduces it."""
    from kernel import routing
    from triton_adversarial_rows import batches, families

    for renormalize in (True, False):
        routing.prepare(renormalize)
    tried = 0
    for case in case_plan(families(), batches):
        tried += 1
        run = run_case(case)
        if not run.lines:
            continue
        first = describe(case)
        steps = []
        if run.error is None:  # after a fault the context is gone: keep the case that faulted
            case, steps = minimise(case)
            run = run_case(case)
        path = save_case(name, description, case, run, first, tried, steps)
        if run.error is None and not replay_one(path)["killed"]:
            raise RuntimeError(f"{path}: the saved case does not reproduce the mismatch")
        evidence = [f"case {tried} ({first}) mismatches; minimal: {describe(case)}"] + run.lines[:MISMATCH_LINES]
        return {"killed": True, "evidence": evidence, "case": str(path)}
    return {"killed": False, "evidence": [f"{tried} cases bit-exact"], "case": None}


def describe(case):
    return f"{case.label} scale={case.scale!r} renormalize={case.renormalize} local={case.local}"


def replay_one(path):
    """The case in ``path`` on the imported kernel; RuntimeError when the model no longer gives the saved
    model outputs (the case would then test something else)."""
    data, case = read_case(path)
    run = run_case(case)
    saved = decode_outputs(data["outputs"]["model"])
    drift = [field for field, a, b in zip(("ids", "weights", "metadata"), run.want, saved)
             if (a is None) != (b is None) or (a is not None and not np.array_equal(a, b))]
    if drift:
        raise RuntimeError(f"{path}: the model's outputs changed since the case was saved ({drift})")
    return {"killed": bool(run.lines),
            "evidence": [f"{Path(path).name}: {line}" for line in run.lines[:MISMATCH_LINES]]}


def replay(paths):
    """Every case file on the imported kernel: killed when any of them mismatches."""
    results = [replay_one(path) for path in paths]
    return {"killed": any(r["killed"] for r in results), "evidence": [e for r in results for e in r["evidence"]],
            "case": None}


# ---------------------------------------------------------------------------------------------- static

def ptx_digest(ptx_text):
    """sha256 of the PTX without comments and debug lines (.file names the source's path)."""
    lines = [line for line in ptx_text.splitlines() if not line.lstrip().startswith((".loc", ".file", "//"))]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _problems(checks, variant, where):
    evidence = []
    for check, run_check in checks.items():
        try:
            problems = run_check(variant)
        except Exception as exc:  # a check that cannot read the code says so: the contract is broken
            problems = [f"the check raised {type(exc).__name__}: {exc}"]
        evidence += [f"{where}: {check}: {problem}" for problem in problems]
    return evidence


def static(first_kill):
    """kernel/codegen_checks.py over every variant; with ``first_kill``, stop at the first variant that
    fails a check (the PTX checks run before the cubin is disassembled)."""
    from kernel import codegen_checks

    evidence = [f"constants: {problem}" for problem in codegen_checks.constant_problems()]
    digests = {}
    for metadata, renormalize in codegen_checks.VARIANTS:
        if evidence and first_kill:
            break
        variant = codegen_checks.compile_variant(metadata, renormalize)  # a compile error ends the probe
        where = f"metadata={metadata} renormalize={renormalize}"
        digests[where] = ptx_digest(variant["ptx"])
        evidence += _problems(codegen_checks.PTX_CHECKS, variant, where)
        if not (evidence and first_kill):
            evidence += _problems(codegen_checks.CUBIN_CHECKS, codegen_checks.read_cubin(variant), where)
    return {"killed": bool(evidence), "evidence": evidence, "case": None, "ptx_sha256": digests}


# ---------------------------------------------------------------------------------------------- main

def _check_imported(kernel_dir):
    """The imported kernel must be the copy under test, never the repository's."""
    import kernel.routing

    imported = Path(kernel.routing.__file__).resolve().parent
    if imported != Path(kernel_dir).resolve():
        raise RuntimeError(f"imported kernel.routing from {imported}, expected the copy in {kernel_dir}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tier", choices=("static", "differential", "replay"))
    parser.add_argument("--kernel-dir", required=True)
    parser.add_argument("--result", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--description", default="")
    parser.add_argument("--case", nargs="*", default=(), help="replay: the case files")
    parser.add_argument("--first-kill", action="store_true", help="static: stop at the first variant that fails")
    args = parser.parse_args(argv)
    _check_imported(args.kernel_dir)
    try:
        if args.tier == "static":
            result = static(args.first_kill)
        elif args.tier == "differential":
            result = differential(args.name, args.description)
        else:
            result = replay(args.case)
    except Exception:
        traceback.print_exc()
        return 2
    Path(args.result).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
