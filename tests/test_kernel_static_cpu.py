"""The routing kernel compiled for sm_90a without a GPU: its PTX and SASS read statically.

Every variant (metadata x renormalize) must compile and pass every check of properties/codegen/checks.py: its
float arithmetic is exactly the Triton oracle's (the same expression trees, ex2.approx.f32 without .ftz,
div.full.f32, no fma), the bias loads precede ``griddepcontrol.wait`` and the logits loads follow it, and the
variant without metadata has no branch after the wait. Each check is also shown to fail on an edited copy of
the real PTX (properties/mutants/catalog.py edits the kernel's source instead).
"""

import re

import numpy as np
import pytest

from kernel import routing
from oracles.ptx import flow
from properties.codegen import checks as codegen_checks
from properties.codegen.checks import VARIANTS, compiled, float_mismatch, load_placement_problems
from kernel.network import SORT8


@pytest.fixture(params=VARIANTS, ids=lambda v: f"metadata={v[0]}-renormalize={v[1]}")
def variant(request):
    return compiled(*request.param)


@pytest.mark.parametrize("check", sorted(codegen_checks.CHECKS))
def test_every_variant_passes_the_check(variant, check):
    assert codegen_checks.CHECKS[check](variant) == []


# ---------------------------------------------------------------------------------------------- float path

FLOAT_MUTANTS = [
    ("exp flushes subnormals", "ex2.approx.f32", "ex2.approx.ftz.f32"),
    ("IEEE division", "div.full.f32", "div.rn.f32"),
    ("fused multiply-add", r"mul\.f32 (%r\d+), (%r\d+), 0f3FB8AA3B", r"fma.rn.f32 \1, \2, 0f3FB8AA3B, 0f00000000"),
    ("another eps", "0f26901D7D", "0f26901D7E"),
    ("a lost sigmoid step", r"sub\.f32 (%r\d+), 0f00000000, (%r\d+)", r"mov.b32 \1, \2"),
]


@pytest.mark.parametrize("name,pattern,replacement", FLOAT_MUTANTS, ids=[m[0] for m in FLOAT_MUTANTS])
def test_a_changed_float_emission_is_reported(name, pattern, replacement):
    real = compiled(False, True)["ptx"]
    mutated = re.sub(pattern, replacement, real, count=1)
    assert mutated != real, f"the {name!r} edit no longer applies"
    assert float_mismatch(mutated, True) is not None, f"{name} went unnoticed"


# ---------------------------------------------------------------------------------------------- the wait

def _move_wait(ptx_text, after_load):
    """The PTX with griddepcontrol.wait moved just after the ``after_load``-th ld.global.v4 (0: before all)."""
    lines = [line for line in ptx_text.splitlines() if flow.WAIT not in line]
    loads = [i for i, line in enumerate(lines) if "ld.global.v4.f32" in line]
    at = loads[after_load - 1] + 1 if after_load else loads[0]
    return "\n".join(lines[:at] + [f"\t{flow.WAIT};"] + lines[at:])


@pytest.mark.parametrize("after_load", [0, 1, 3, 4], ids=lambda n: f"wait-after-{n}-loads")
def test_a_misplaced_wait_is_reported(after_load):
    assert load_placement_problems(_move_wait(compiled(False, True)["ptx"], after_load)) != []


def test_a_branch_after_the_wait_is_reported():
    real = compiled(False, True)
    label = re.search(r"^(\$L__BB\d+_\d+):", real["ptx"], re.M).group(1)
    mutated = {**real, "ptx": real["ptx"].replace(f"{flow.WAIT};", f"{flow.WAIT};\n\t@%p1 bra {label};", 1)}
    assert codegen_checks.branch_problems(mutated) != []


def test_sass_without_its_wait_or_with_an_ffma_is_reported():
    real = compiled(False, True)["sass"]
    assert codegen_checks.sass_problems(real.replace("ACQBULK", "NOP")) != []
    assert codegen_checks.sass_problems(real.replace("FMUL", "FFMA", 1)) != []


# ---------------------------------------------------------------------------------------------- the rest

def test_spills_are_reported():
    usage = compiled(False, True)["resources"]
    assert codegen_checks.resource_problems({**usage, "local_bytes": 8}) != []


def test_sorting_network_sorts_every_zero_one_input():
    """By the 0-1 principle, sorting all 2^8 binary inputs proves the network sorts any input."""
    for bits in range(1 << 8):
        values = [(bits >> i) & 1 for i in range(8)]
        for i, j in SORT8:
            values[i], values[j] = max(values[i], values[j]), min(values[i], values[j])
        assert values == sorted(values, reverse=True), bits


def test_float_constants_are_the_float32_values():
    assert codegen_checks.constant_problems() == []


def test_a_wrong_constant_is_reported(monkeypatch):
    monkeypatch.setattr(routing, "RENORM_EPS", routing.Imm(int(np.float32(1e-20).view(np.uint32))))
    assert codegen_checks.constant_problems() != []
