"""The routing kernel compiled for sm_90a without a GPU: its PTX and SASS read statically.

Every variant (metadata x renormalize) must compile; its float arithmetic must be exactly the Triton
oracle's (the same expression trees, ex2.approx.f32 without .ftz, div.full.f32, no fma), the bias loads
must precede ``griddepcontrol.wait`` and the logits loads follow it, and the variant without metadata has
no branch after the wait. Each check is also shown to fail on an edited copy of the real PTX.
"""

import functools
import itertools
import re
from collections import Counter

import numpy as np
import pytest

from kernel import ptx, routing
from kernel.network import SORT8
from oracles.ptx_float_ops import expression_roots, float_ops
from oracles.triton_codegen import compile_ptx as triton_ptx

VARIANTS = list(itertools.product((False, True), (False, True)))  # (metadata, renormalize)
LOGITS_PARAM, BIAS_PARAM = 0, 1  # kernel parameter order: logits, bias, ids, weights, scale, ...
SIGMOID = ("sub.f32", "mul.f32", "ex2.approx.f32", "add.f32", "div.full.f32")


@functools.lru_cache(maxsize=None)
def _compiled(metadata, renormalize):
    ptx_text, cubin = routing.compile_artifacts(metadata, renormalize)
    return {"metadata": metadata, "renormalize": renormalize, "ptx": ptx_text, "cubin": cubin,
            "sass": ptx.sass(cubin), "resources": ptx.resource_usage(cubin)}


@pytest.fixture(params=VARIANTS, ids=lambda v: f"metadata={v[0]}-renormalize={v[1]}")
def variant(request):
    return _compiled(*request.param)


@pytest.fixture(params=(False, True), ids=lambda r: f"renormalize={r}")
def plain_variant(request):
    return _compiled(False, request.param)


# ---------------------------------------------------------------------------------------------- float path

def expected_float_opcodes(renormalize):
    """Per thread: a sigmoid and a bias add for each of the lane's 8 experts, then the weight of its pick:
    0.0 + s_0 + ... + s_7, + 1e-15, div.full, mul; or one mul by scale."""
    ops = list(SIGMOID) * routing.EXPERTS_PER_LANE + ["add.f32"] * routing.EXPERTS_PER_LANE
    ops += ["add.f32"] * routing.TOP_K + ["add.f32", "div.full.f32", "mul.f32"] if renormalize else ["mul.f32"]
    return Counter(ops)


def float_mismatch(ptx_text, renormalize):
    """None when the kernel's float arithmetic is the Triton oracle's (same opcodes, same trees per thread),
    else what differs."""
    opcodes = Counter(op.opcode for op in float_ops(ptx_text))
    if opcodes != expected_float_opcodes(renormalize):
        return f"float opcodes {dict(opcodes)} != {dict(expected_float_opcodes(renormalize))}"
    mine, triton = expression_roots(ptx_text), expression_roots(triton_ptx(renormalize))
    if mine != triton:
        return f"float trees differ from Triton's:\n  kernel {dict(mine)}\n  triton {dict(triton)}"
    return None


def test_float_arithmetic_is_the_triton_oracles(variant):
    mismatch = float_mismatch(variant["ptx"], variant["renormalize"])
    assert mismatch is None, mismatch


FLOAT_MUTANTS = [
    ("exp flushes subnormals", "ex2.approx.f32", "ex2.approx.ftz.f32"),
    ("IEEE division", "div.full.f32", "div.rn.f32"),
    ("fused multiply-add", r"mul\.f32 (%r\d+), (%r\d+), 0f3FB8AA3B", r"fma.rn.f32 \1, \2, 0f3FB8AA3B, 0f00000000"),
    ("another eps", "0f26901D7D", "0f26901D7E"),
    ("a lost sigmoid step", r"sub\.f32 (%r\d+), 0f00000000, (%r\d+)", r"mov.b32 \1, \2"),
]


@pytest.mark.parametrize("name,pattern,replacement", FLOAT_MUTANTS, ids=[m[0] for m in FLOAT_MUTANTS])
def test_a_changed_float_emission_is_reported(name, pattern, replacement):
    real = _compiled(False, True)["ptx"]
    mutated = re.sub(pattern, replacement, real, count=1)
    assert mutated != real, f"the {name!r} edit no longer applies"
    assert float_mismatch(mutated, True) is not None, f"{name} went unnoticed"


# ---------------------------------------------------------------------------------------------- the wait

def load_placement_problems(ptx_text):
    """What is wrong with the global loads: other than two 16-byte bias loads reachable only before the
    wait and two 16-byte logits loads reachable only after it, each pair in program order."""
    loads = ptx.global_loads(ptx_text)
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


def test_bias_loads_precede_the_wait_and_logits_loads_follow_it(variant):
    assert load_placement_problems(variant["ptx"]) == []


def _move_wait(ptx_text, after_load):
    """The PTX with griddepcontrol.wait moved just after the ``after_load``-th ld.global.v4 (0: before all)."""
    lines = [line for line in ptx_text.splitlines() if ptx.WAIT not in line]
    loads = [i for i, line in enumerate(lines) if "ld.global.v4.f32" in line]
    at = loads[after_load - 1] + 1 if after_load else loads[0]
    return "\n".join(lines[:at] + [f"\t{ptx.WAIT};"] + lines[at:])


@pytest.mark.parametrize("after_load", [0, 1, 3, 4], ids=lambda n: f"wait-after-{n}-loads")
def test_a_misplaced_wait_is_reported(after_load):
    assert load_placement_problems(_move_wait(_compiled(False, True)["ptx"], after_load)) != []


def test_sass_keeps_two_128_bit_loads_on_each_side_of_the_wait(variant):
    opcodes = ptx.sass_opcodes(variant["sass"])
    assert opcodes.count("ACQBULK") == 1
    wait = opcodes.index("ACQBULK")
    assert [op for op in opcodes[:wait] if op.startswith("LDG")] == ["LDG.E.128"] * 2
    assert [op for op in opcodes[wait:] if op.startswith("LDG")] == ["LDG.E.128"] * 2
    assert not any(op.startswith("FFMA") for op in opcodes)


def test_without_metadata_no_branch_follows_the_wait(plain_variant):
    assert ptx.branches_after_wait(plain_variant["ptx"]) == []


def test_a_branch_after_the_wait_is_reported():
    real = _compiled(False, True)["ptx"]
    label = re.search(r"^(\$L__BB\d+_\d+):", real, re.M).group(1)
    mutated = real.replace(f"{ptx.WAIT};", f"{ptx.WAIT};\n\t@%p1 bra {label};", 1)
    assert ptx.branches_after_wait(mutated) != []


def _global_writes(program, indices):
    return [i for i in sorted(indices) if program.instructions[i].base in ("st", "atom", "red")
            and "global" in program.instructions[i].types]


def test_global_writes_follow_the_wait_and_dependents_launch_at_the_end(variant):
    program = ptx.parse(variant["ptx"])
    before, after = ptx.wait_regions(program)
    assert _global_writes(program, before) == []
    assert _global_writes(program, after) != []
    launch = [i.index for i in program.instructions if i.opcode == ptx.LAUNCH_DEPENDENTS]
    assert len(launch) == 1
    assert _global_writes(program, ptx.reachable(program, launch[0])) == []
    exits = [i.index for i in program.instructions if i.base in ("ret", "exit")]
    assert not set(exits) & ptx.reachable(program, 0, stop_opcode=ptx.LAUNCH_DEPENDENTS)


# ---------------------------------------------------------------------------------------------- resources

def test_resources_no_local_memory(variant):
    usage = variant["resources"]
    print(f"metadata={variant['metadata']} renormalize={variant['renormalize']}: {usage}")
    assert usage["local_bytes"] == 0 and usage["stack_bytes"] == 0
    assert usage["registers"] <= 255


def test_sorting_network_sorts_every_zero_one_input():
    """By the 0-1 principle, sorting all 2^8 binary inputs proves the network sorts any input."""
    for bits in range(1 << 8):
        values = [(bits >> i) & 1 for i in range(8)]
        for i, j in SORT8:
            values[i], values[j] = max(values[i], values[j]), min(values[i], values[j])
        assert values == sorted(values, reverse=True), bits


@pytest.mark.parametrize("imm,value", [("ZERO", 0.0), ("ONE", 1.0), ("LOG2E", np.log2(np.e)),
                                        ("RENORM_EPS", 1e-15)])
def test_float_constants_are_the_float32_values(imm, value):
    assert getattr(routing, imm).bits == int(np.float32(value).view(np.uint32))
