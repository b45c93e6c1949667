"""The routing kernel compiled for sm_90a without a GPU: its PTX and SASS read statically.

Every variant (metadata x renormalize) must compile; its float path must hold exactly the instructions
Triton 3.6.0 emits for the routing expressions (hardware facts, section 1), the bias loads must precede
``griddepcontrol.wait`` and the logits loads follow it, and the variant without metadata has no branch
after the wait.
"""

import functools
import itertools
from collections import Counter

import numpy as np
import pytest

from kernel import ptx, routing
from kernel.network import SORT8


VARIANTS = list(itertools.product((False, True), (False, True)))  # (metadata, renormalize)
LOGITS_PARAM, BIAS_PARAM = 0, 1  # kernel parameter order: logits, bias, ids, weights, scale, ...
EXPERTS_PER_THREAD = routing.EXPERTS_PER_LANE
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


def expected_float_ops(renormalize):
    """Per thread: 8 sigmoids and 8 bias adds (one per expert of the lane), then the weight of its pick:
    0.0 + s_0 + ... + s_7, + 1e-15, div.full, mul; or one mul by scale."""
    ops = list(SIGMOID) * EXPERTS_PER_THREAD + ["add.f32"] * EXPERTS_PER_THREAD
    ops += ["add.f32"] * routing.TOP_K + ["add.f32", "div.full.f32", "mul.f32"] if renormalize else ["mul.f32"]
    return Counter(ops)


def test_float_path_is_exactly_the_triton_instructions(variant):
    assert Counter(ptx.float_opcodes(variant["ptx"])) == expected_float_ops(variant["renormalize"])


def _definitions(ops):
    return {op.operands[0]: op for op in ops}


def test_each_sigmoid_is_tritons_sequence_with_its_constants(variant):
    ops = ptx.float_ops(variant["ptx"])
    defs = _definitions(ops)
    divisions = [op for op in ops if op.opcode == "div.full.f32" and op.operands[1] == routing.ONE.literal]
    assert len(divisions) == EXPERTS_PER_THREAD
    for div in divisions:
        add = defs[div.operands[2]]
        assert (add.opcode, add.operands[2]) == ("add.f32", routing.ONE.literal)
        ex2 = defs[add.operands[1]]
        assert ex2.opcode == "ex2.approx.f32"
        mul = defs[ex2.operands[1]]
        assert (mul.opcode, mul.operands[2]) == ("mul.f32", routing.LOG2E.literal)
        sub = defs[mul.operands[1]]
        assert (sub.opcode, sub.operands[1]) == ("sub.f32", routing.ZERO.literal)


def test_weight_tail_is_the_pick_order_sum_then_one_division(variant):
    tail = ptx.float_ops(variant["ptx"])[-(routing.TOP_K + 3 if variant["renormalize"] else 1):]
    if not variant["renormalize"]:
        assert [op.opcode for op in tail] == ["mul.f32"]
        return
    total = tail[0]
    assert total.opcode == "add.f32" and total.operands[1] == routing.ZERO.literal
    for op in tail[1:routing.TOP_K]:
        assert op.opcode == "add.f32" and op.operands[1] == total.operands[0]
        total = op
    eps, div, mul = tail[routing.TOP_K:]
    assert (eps.opcode, eps.operands[1:]) == ("add.f32", (total.operands[0], routing.RENORM_EPS.literal))
    assert div.opcode == "div.full.f32" and div.operands[2] == eps.operands[0]
    assert mul.opcode == "mul.f32" and div.operands[0] in mul.operands[1:]


def test_bias_loads_precede_the_wait_and_logits_loads_follow_it(variant):
    loads = ptx.global_loads(variant["ptx"])
    by_param = {p: [load for load in loads if load.params == {p}] for p in (LOGITS_PARAM, BIAS_PARAM)}
    assert len(loads) == 4 and all(load.instruction.opcode == "ld.global.v4.f32" for load in loads)
    assert [(load.before_wait, load.after_wait) for load in by_param[BIAS_PARAM]] == [(True, False)] * 2
    assert [(load.before_wait, load.after_wait) for load in by_param[LOGITS_PARAM]] == [(False, True)] * 2
    # Program order inside each pair: the first 16 bytes, then the next.
    for pair in by_param.values():
        assert pair[0].instruction.index < pair[1].instruction.index


def test_sass_keeps_two_128_bit_loads_on_each_side_of_the_wait(variant):
    opcodes = ptx.sass_opcodes(variant["sass"])
    wait = opcodes.index("ACQBULK")
    assert opcodes.count("ACQBULK") == 1
    assert [op for op in opcodes[:wait] if op.startswith("LDG")] == ["LDG.E.128"] * 2
    assert [op for op in opcodes[wait:] if op.startswith("LDG")] == ["LDG.E.128"] * 2
    assert not any(op.startswith("FFMA") for op in opcodes)


def test_without_metadata_no_branch_follows_the_wait(plain_variant):
    assert ptx.branches_after_wait(plain_variant["ptx"]) == []


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
