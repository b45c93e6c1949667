"""What Triton 3.6.0 emits for the oracle kernel on sm_90, read ahead of time without a GPU.

The expected float arithmetic is built from the routing contract (sigmoid as Triton writes it:
1 / (1 + exp(-x)), exp as ex2.approx.f32 of x * log2(e); c = s + bias; total = 0.0 + p_0 + ... + p_7;
w = p * (scale / (total + 1e-15)) or p * scale) and the lowering of each operator in
/work/shared/hardware-facts.md section 1, over named leaves (oracles/ptx/leaves.py): element j of the logits
and of the bias a thread holds, the scale, and pick p_k as the value exchanged across the warp in round k
(the thread's own pick, selected from all eight, is as deep as the last). A Triton upgrade that emits
anything else fails here, and the message names the trees that appeared and disappeared.
"""

import math
import re

import numpy as np
import pytest
import triton

from kernel.layout import WARP as WARP_SIZE
from oracles.ptx.float_ops import LEAF, expression, expression_roots, float_immediate, float_ops
from oracles.ptx.leaves import element, exchanged
from oracles.triton_codegen import PARAMS, compile_ptx, compile_sass
from oracles.triton_routing import N_EXPERTS, NUM_WARPS, ROUTER_SCORE_DIVISION_EPS, TOP_K

EXPERTS_PER_THREAD = N_EXPERTS // (WARP_SIZE * NUM_WARPS)


def imm(value):
    """Tree string of the float32 immediate nearest `value` (how LLVM prints a float constant)."""
    return float_immediate(int(np.float32(value).view(np.uint32)))


ZERO, ONE = imm(0.0), imm(1.0)
LOG2E = imm(math.log2(math.e))
EPS = imm(ROUTER_SCORE_DIVISION_EPS)


def sigmoid(x):
    """tl.sigmoid: div.full(1, 1 + ex2.approx(log2e * (0 - x))), ex2 without .ftz."""
    exp_neg_x = expression("ex2.approx.f32", expression("mul.f32", expression("sub.f32", ZERO, x), LOG2E))
    return expression("div.full.f32", ONE, expression("add.f32", exp_neg_x, ONE))


def pick_order_total():
    """0.0 + p_0 + ... + p_7, left to right."""
    total = expression("add.f32", ZERO, exchanged(0))
    for k in range(1, TOP_K):
        total = expression("add.f32", total, exchanged(k))
    return total


SCORES = {expression("add.f32", sigmoid(element("logits", j)), element("bias", j))
          for j in range(EXPERTS_PER_THREAD)}
OWN_PICK = exchanged(TOP_K - 1)
RENORMALIZED_WEIGHT = expression(
    "mul.f32", OWN_PICK, expression("div.full.f32", "scale", expression("add.f32", pick_order_total(), EPS)))
PLAIN_WEIGHT = expression("mul.f32", exchanged(0), "scale")
EXPECTED_ROOTS = {True: SCORES | {RENORMALIZED_WEIGHT}, False: SCORES | {PLAIN_WEIGHT}}


def test_triton_is_the_pinned_version():
    assert triton.__version__ == "3.6.0", f"the oracle is pinned to Triton 3.6.0, found {triton.__version__}"


def contract_mismatch(ptx, renormalize):
    """None when the PTX's float arithmetic is the contract's, else a message naming the difference."""
    roots = set(expression_roots(ptx, PARAMS))
    expected = EXPECTED_ROOTS[renormalize]
    appeared, disappeared = sorted(roots - expected), sorted(expected - roots)
    if not appeared and not disappeared:
        return None
    return ("Triton's float arithmetic changed.\n  emitted, not in the contract:\n    " + "\n    ".join(appeared)
            + "\n  in the contract, not emitted:\n    " + "\n    ".join(disappeared))


@pytest.mark.parametrize("renormalize", [True, False])
def test_float_arithmetic_is_exactly_the_contract(renormalize):
    mismatch = contract_mismatch(compile_ptx(renormalize), renormalize)
    assert mismatch is None, mismatch


# Edits of the real PTX that a Triton upgrade could make; each must be reported: (name, pattern, replacement,
# the renormalize settings whose kernel contains the pattern).
MUTANTS = [
    ("exp flushes subnormals", "ex2.approx.f32", "ex2.approx.ftz.f32", (True, False)),
    ("IEEE division", "div.full.f32", "div.rn.f32", (True, False)),
    ("round-to-nearest add", "add.f32", "add.rn.f32", (True, False)),
    ("negation instead of 0 - x", r"sub\.f32(\s+%r\d+), %r\d+,", r"neg.f32\1,", (True, False)),
    ("another eps", "0f26901D7D", "0f26901D7E", (True,)),
]


@pytest.mark.parametrize("name, pattern, replacement, renormalize",
                         [(n, p, r, flag) for n, p, r, flags in MUTANTS for flag in flags])
def test_a_changed_emission_is_reported(name, pattern, replacement, renormalize):
    ptx = compile_ptx(renormalize)
    mutated = re.sub(pattern, replacement, ptx)
    assert mutated != ptx, f"the {name!r} edit no longer applies to the emitted PTX"
    assert contract_mismatch(mutated, renormalize) is not None, f"{name} went unnoticed"


@pytest.mark.parametrize("renormalize", [True, False])
def test_every_expert_goes_through_the_full_sigmoid_with_its_own_bias(renormalize):
    roots = expression_roots(compile_ptx(renormalize), PARAMS)
    assert {score: roots[score] for score in SCORES} == dict.fromkeys(SCORES, 1), (
        f"expected one sigmoid + bias chain for each of the {EXPERTS_PER_THREAD} experts a thread holds")


@pytest.mark.parametrize("renormalize", [True, False])
def test_every_leaf_is_named(renormalize):
    assert not any(LEAF in root for root in expression_roots(compile_ptx(renormalize), PARAMS))


@pytest.mark.parametrize("renormalize", [True, False])
def test_exp_is_ex2_approx_without_ftz(renormalize):
    ex2 = [op.opcode for op in float_ops(compile_ptx(renormalize)) if op.opcode.startswith("ex2")]
    assert ex2 and set(ex2) == {"ex2.approx.f32"}, f"sigmoid's exp must be ex2.approx.f32, got {sorted(set(ex2))}"


@pytest.mark.parametrize("renormalize", [True, False])
def test_no_fused_multiply_add(renormalize):
    fused = [op.opcode for op in float_ops(compile_ptx(renormalize)) if op.opcode.split(".")[0] in ("fma", "mad")]
    assert not fused, f"Triton contracted an operation into {fused}"


@pytest.mark.parametrize("renormalize", [True, False])
def test_ptxas_contracts_nothing_into_ffma(renormalize):
    # mul.f32/add.f32 without .rn let ptxas contract them; the contract has no multiply feeding an add.
    sass = compile_sass(renormalize)
    assert "MUFU.EX2" in sass, "the SASS has no MUFU.EX2: not the expected cubin"
    assert not re.search(r"\bFFMA\b", sass), "ptxas contracted a multiply and an add into FFMA"
