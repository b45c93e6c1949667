"""The routing kernel's codegen contract, read statically off its PTX and SASS (no GPU needed).

Each check returns the list of problems it finds in one compiled variant (empty when the variant complies):
the float arithmetic is exactly the Triton oracle's (same opcodes, same expression trees over the same named
leaves, oracles/ptx/leaves.py: ex2.approx.f32 without .ftz, div.full.f32, no fma); the bias is loaded only
before ``griddepcontrol.wait`` and the logits only after it; global writes come only after the wait and none
after ``launch_dependents``; without metadata no branch follows the wait; the SASS keeps two 128-bit loads on
each side of the wait and has no FFMA; no local memory; the float constants are the float32 values they name;
the lanes' sorting network sorts (the 0-1 principle); the block is one-dimensional, of the threads the
variant assumes; a barrier stands between every shared store and the shared loads and atomics after it.
Used by tests/test_kernel_static_cpu.py and by the mutant probe (properties/mutants/probe.py), which runs them
on edited copies of the kernel.
"""

import functools
import inspect
import re
import tempfile
from collections import Counter

import numpy as np

from kernel import network as sorting_network
from kernel import routing
from kernel.layout import MAX_TILE, MAX_TOKENS, TOP_K, WARP
from common.provenance import REPO_ROOT
from oracles.ptx import flow, sass
from oracles.ptx.float_ops import expression_roots, float_ops
from oracles.ptx.reader import parse
from oracles.triton_codegen import PARAMS as TRITON_PARAMS
from oracles.triton_codegen import compile_ptx as triton_ptx

BUILD = REPO_ROOT / "build"
VARIANTS = routing.VARIANT_KEYS  # (metadata, renormalize, tokens)
# The kernel's parameters in PTX order, named as the Triton oracle's are (mLogits -> logits).
PARAMS = tuple(re.sub(r"^m(?=[A-Z])", "", name).lower()
               for name in list(inspect.signature(routing.Routing.kernel).parameters)[1:])
LOGITS_PARAM, BIAS_PARAM = PARAMS.index("logits"), PARAMS.index("bias")
SIGMOID = ("sub.f32", "mul.f32", "ex2.approx.f32", "add.f32", "div.full.f32")
WIDE_LOAD = "LDG.E.128"
MAX_REGISTERS = 255
# routing's float constants and the values they must hold.
CONSTANTS = {"ZERO": 0.0, "ONE": 1.0, "LOG2E": float(np.log2(np.e)), "RENORM_EPS": 1e-15}


def artifacts(metadata, renormalize, tokens=0, arch="sm_90a"):
    """(PTX text, cubin bytes) of one variant compiled for ``arch``, dumped into a fresh folder under build/ (so
    parallel processes never read each other's files) that is removed afterwards."""
    BUILD.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="routing-artifacts-", dir=BUILD) as folder:
        return routing.compile_artifacts(metadata, renormalize, tokens, folder, arch)


def compile_variant(metadata, renormalize, tokens=0):
    """One variant compiled for sm_90a: its PTX and cubin."""
    ptx_text, cubin = artifacts(metadata, renormalize, tokens)
    return {"metadata": metadata, "renormalize": renormalize, "tokens": tokens, "ptx": ptx_text, "cubin": cubin}


def read_cubin(variant):
    """The variant with its cubin's SASS and resource usage added (cuobjdump)."""
    return {**variant, "sass": sass.sass(variant["cubin"]), "resources": sass.resource_usage(variant["cubin"])}


@functools.lru_cache(maxsize=None)
def compiled(metadata, renormalize, tokens=0):
    """One variant compiled for sm_90a: its PTX, cubin, SASS and resource usage."""
    return read_cubin(compile_variant(metadata, renormalize, tokens))


# ---------------------------------------------------------------------------------------------- float path

def expected_float_opcodes(renormalize):
    """Per thread: a sigmoid and a bias add for each of the lane's 8 experts, then the weight of its pick:
    0.0 + s_0 + ... + s_7, + 1e-15, div.full, mul; or one mul by scale."""
    ops = list(SIGMOID) * routing.EXPERTS_PER_LANE + ["add.f32"] * routing.EXPERTS_PER_LANE
    ops += ["add.f32"] * routing.TOP_K + ["add.f32", "div.full.f32", "mul.f32"] if renormalize else ["mul.f32"]
    return Counter(ops)


def float_mismatch(ptx_text, renormalize):
    """None when the kernel's float arithmetic is the Triton oracle's (same opcodes, same trees per thread,
    their leaves named alike: which input element, parameter or exchanged pick), else what differs."""
    opcodes = Counter(op.opcode for op in float_ops(ptx_text))
    if opcodes != expected_float_opcodes(renormalize):
        return f"float opcodes {dict(opcodes)} != {dict(expected_float_opcodes(renormalize))}"
    mine, triton = expression_roots(ptx_text, PARAMS), expression_roots(triton_ptx(renormalize), TRITON_PARAMS)
    if mine != triton:
        return (f"float trees differ from Triton's:\n  kernel only {dict(mine - triton)}\n"
                f"  triton only {dict(triton - mine)}")
    return None


def float_problems(variant):
    mismatch = float_mismatch(variant["ptx"], variant["renormalize"])
    return [] if mismatch is None else [mismatch]


# ---------------------------------------------------------------------------------------------- the wait

def load_placement_problems(ptx_text):
    """What is wrong with the global loads: other than two 16-byte bias loads reachable only before the
    wait and two 16-byte logits loads reachable only after it, each pair in program order."""
    loads = flow.global_loads(ptx_text)
    problems = [f"unexpected load {load.instruction}" for load in loads
                if load.params not in ({LOGITS_PARAM}, {BIAS_PARAM})
                or load.instruction.opcode != "ld.global.v4.f32"]
    for param, name, place in ((BIAS_PARAM, "bias", (True, False)), (LOGITS_PARAM, "logits", (False, True))):
        pair = [load for load in loads if load.params == {param}]
        if [(load.before_wait, load.after_wait) for load in pair] != [place] * 2:
            problems.append(f"{name} loads (before, after the wait): "
                            f"{[(load.before_wait, load.after_wait) for load in pair]}, expected {[place] * 2}")
        elif pair[0].instruction.index > pair[1].instruction.index:
            problems.append(f"{name} loads out of program order")
    return problems


def sass_problems(sass_text):
    """The SASS must keep one wait (ACQBULK) with two 128-bit global loads on each side, and no FFMA."""
    opcodes = sass.sass_opcodes(sass_text)
    if opcodes.count("ACQBULK") != 1:
        return [f"SASS has {opcodes.count('ACQBULK')} ACQBULK, expected 1"]
    wait = opcodes.index("ACQBULK")
    problems = [f"SASS global loads {side} the wait: {loads}, expected {[WIDE_LOAD] * 2}"
                for side, loads in (("before", [op for op in opcodes[:wait] if op.startswith("LDG")]),
                                    ("after", [op for op in opcodes[wait:] if op.startswith("LDG")]))
                if loads != [WIDE_LOAD] * 2]
    ffma = [op for op in opcodes if op.startswith("FFMA")]
    return problems + ([f"SASS has {len(ffma)} FFMA"] if ffma else [])


def branch_problems(variant):
    """Without metadata, no branch after the wait may differ between a warp's lanes (warps past the last row
    leave before it); a warp-uniform one, on ballots alone (the top 8's fall-back to its exact rounds), may."""
    if variant["metadata"]:
        return []
    return [f"lane-dependent branch after the wait: {inst}"
            for inst in flow.lane_dependent_branches_after_wait(variant["ptx"])]


def _global_writes(program, indices):
    return [i for i in sorted(indices) if program.instructions[i].base in ("st", "atom", "red")
            and "global" in program.instructions[i].types]


def write_placement_problems(ptx_text):
    """Global writes only after the wait, none after the one launch_dependents, and no exit that skips it."""
    program = parse(ptx_text)
    before, after = flow.wait_regions(program)
    problems = [f"global write before the wait: {program.instructions[i]}" for i in _global_writes(program, before)]
    if not _global_writes(program, after):
        problems.append("no global write after the wait")
    launch = [i.index for i in program.instructions if i.opcode == flow.LAUNCH_DEPENDENTS]
    if len(launch) != 1:
        return problems + [f"{len(launch)} {flow.LAUNCH_DEPENDENTS}, expected 1"]
    problems += [f"global write after {flow.LAUNCH_DEPENDENTS}: {program.instructions[i]}"
                 for i in _global_writes(program, flow.reachable(program, launch[0]))]
    exits = [i.index for i in program.instructions if i.base in ("ret", "exit")]
    if set(exits) & flow.reachable(program, 0, stop_opcode=flow.LAUNCH_DEPENDENTS):
        problems.append(f"an exit is reachable without passing {flow.LAUNCH_DEPENDENTS}")
    return problems


def shared_order_problems(ptx_text):
    """Every shared-memory store reaches a later shared load or atomic only through a barrier (bar.sync, or
    bar.warp.sync): the scores, the zeroed route words, a token's picks and the warps' CTA counts are each read by
    other threads, and the kernel reads no shared word its own thread stored without a barrier between."""
    program = parse(ptx_text)
    problems = []
    for store in program.instructions:
        if store.base != "st" or "shared" not in store.types:
            continue
        unordered = [program.instructions[i] for i in sorted(flow.reachable(program, store.index, flow.BARRIERS))
                     if i != store.index and program.instructions[i].base in ("ld", "atom", "red")
                     and "shared" in program.instructions[i].types]
        if unordered:
            problems.append(f"{unordered[0].opcode} (instruction {unordered[0].index}) can follow {store.opcode} "
                            f"(instruction {store.index}) with no barrier between them")
    return problems


# ---------------------------------------------------------------------------------------------- the rest

REQNTID = re.compile(r"^\s*\.reqntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", re.MULTILINE)


def block_problems(variant):
    """The block the PTX requires (``.reqntid``) must be one-dimensional, of the threads the variant's thread
    arithmetic assumes: BLOCK_THREADS without metadata, a warp per token for the token kernels, THREADS else
    (the kernel reads threadIdx.x alone, so a second dimension would run every thread twice)."""
    found = [tuple(int(n or 1) for n in m.groups()) for m in REQNTID.finditer(variant["ptx"])]
    if variant["metadata"]:
        threads = variant["tokens"] * WARP if variant["tokens"] else routing.THREADS
    else:
        threads = routing.BLOCK_THREADS
    return [] if found == [(threads, 1, 1)] else [f".reqntid {found}, expected [{(threads, 1, 1)}]"]


def resource_problems(usage):
    """No local memory or stack (no spills), at most 255 registers."""
    problems = [f"{field} = {usage[field]}, expected 0" for field in ("local_bytes", "stack_bytes")
                if usage[field]]
    if usage["registers"] > MAX_REGISTERS:
        problems.append(f"{usage['registers']} registers > {MAX_REGISTERS}")
    return problems


def constant_problems():
    """routing's float constants against the float32 values they name."""
    problems = []
    for name, value in CONSTANTS.items():
        want = int(np.float32(value).view(np.uint32))
        if getattr(routing, name).bits != want:
            problems.append(f"routing.{name} = {getattr(routing, name).bits:#010x}, float32({value!r}) is {want:#010x}")
    return problems


def network_problems(network=None):
    """The inputs the lanes' sorting network (kernel.network.SORT8, or ``network``) leaves unsorted, of the 2^8
    binary ones: by the 0-1 principle a network that sorts them sorts every input."""
    network = sorting_network.SORT8 if network is None else network
    problems = []
    for bits in range(1 << TOP_K):
        values = [(bits >> i) & 1 for i in range(TOP_K)]
        for i, j in network:
            values[i], values[j] = max(values[i], values[j]), min(values[i], values[j])
        if values != sorted(values, reverse=True):
            problems.append(f"the sorting network leaves the binary input {bits:08b} unsorted: {values}")
    return problems


def kernel_set_problems():
    """How routing.KERNELS, the kernels prepare() readies and the static tier checks, differs from the kernels
    route launches (routing.kernel_tokens over every b and tile, with and without metadata)."""
    launched = {(metadata, routing.kernel_tokens(metadata, rows, tile)) for metadata in (False, True)
                for rows in range(1, MAX_TOKENS + 1) for tile in range(1, MAX_TILE + 1)}
    listed = set(routing.KERNELS)
    return ([f"route launches {sorted(launched - listed)}, which KERNELS does not list"] * bool(launched - listed) +
            [f"KERNELS lists {sorted(listed - launched)}, which route never launches"] * bool(listed - launched) +
            [f"KERNELS lists a kernel twice: {routing.KERNELS}"] * (len(listed) != len(routing.KERNELS)))


def source_problems():
    """What the kernel's module-level facts break, before any compile: its float constants, its network, its
    list of kernels."""
    return ([f"constants: {p}" for p in constant_problems()] + [f"network: {p}" for p in network_problems()] +
            [f"kernels: {p}" for p in kernel_set_problems()])


# Checks of the PTX alone, then of the cubin (they need read_cubin).
PTX_CHECKS = {
    "float arithmetic": float_problems,
    "load placement": lambda v: load_placement_problems(v["ptx"]),
    "branch after the wait": branch_problems,
    "write placement": lambda v: write_placement_problems(v["ptx"]),
    "block shape": block_problems,
    "shared memory order": lambda v: shared_order_problems(v["ptx"]),
}
CUBIN_CHECKS = {
    "SASS loads and FFMA": lambda v: sass_problems(v["sass"]),
    "resources": lambda v: resource_problems(v["resources"]),
}
CHECKS = {**PTX_CHECKS, **CUBIN_CHECKS}
