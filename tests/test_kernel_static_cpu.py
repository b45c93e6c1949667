"""The routing kernel compiled for sm_90a without a GPU: its PTX and SASS read statically.

Every variant (metadata x renormalize, and with metadata the kernels of b = 1 and 2) must compile and pass
every check of properties/codegen/checks.py: its float arithmetic is exactly the Triton oracle's (the same
expression trees, ex2.approx.f32 without .ftz, div.full.f32, no fma), the bias loads precede
``griddepcontrol.wait`` and the logits loads follow it, and the variant without metadata has no lane-dependent
branch after the wait. Each check, called through ``CHECKS`` as the gate and
the mutant probe call it, is also shown to fail on a hand-edited copy of the real PTX, SASS or resource usage
(properties/mutants/catalog.py edits the kernel's source instead).
"""

import re

import cutlass.cute as cute
import numpy as np
import pytest
from cutlass import Float32, Int32
from cutlass.cute.runtime import make_fake_stream, make_fake_tensor

from kernel import routing
from kernel.layout import EXPERTS, TENSOR_ALIGN, TOP_K
from oracles.ptx import flow
from properties.codegen import checks as codegen_checks
from properties.codegen.checks import CHECKS, VARIANTS, compiled
from kernel.network import SORT8


@pytest.fixture(params=VARIANTS, ids=lambda v: f"metadata={v[0]}-renormalize={v[1]}-tokens={v[2]}")
def variant(request):
    return compiled(*request.param)


@pytest.mark.parametrize("check", sorted(codegen_checks.CHECKS))
def test_every_variant_passes_the_check(variant, check):
    assert codegen_checks.CHECKS[check](variant) == []


# ---------------------------------------------------------------------------------------------- float path

# Two adds of two registers each, the second reading the first's result (a step of a sum) or another register.
_TWO_ADDS = r"(?s)add\.f32\s+(%r\d+), (%r\d+), (%r\d+);(.*?)add\.f32\s+(%r\d+), "
FLOAT_MUTANTS = [
    ("exp flushes subnormals", "ex2.approx.f32", "ex2.approx.ftz.f32"),
    ("IEEE division", "div.full.f32", "div.rn.f32"),
    ("fused multiply-add", r"mul\.f32 (%r\d+), (%r\d+), 0f3FB8AA3B", r"fma.rn.f32 \1, \2, 0f3FB8AA3B, 0f00000000"),
    ("another eps", "0f26901D7D", "0f26901D7E"),
    ("a lost sigmoid step", r"sub\.f32 (%r\d+), 0f00000000, (%r\d+)", r"mov.b32 \1, \2"),
    # The same opcodes, another tree: x - 0 in place of 0 - x.
    ("operands swapped", r"sub\.f32 (%r\d+), 0f00000000, (%r\d+)", r"sub.f32 \1, \2, 0f00000000"),
    # The same opcodes and tree shapes over other leaves (oracles/ptx/leaves.py): the first score takes another
    # expert's bias; the pick sum adds its 2nd and 3rd picks in the other order (0.0 + s_0 + s_2 + s_1 + ...).
    ("bias of another expert", _TWO_ADDS + r"(%r\d+), (%r\d+);", r"add.f32 \1, \2, \7;\4add.f32 \5, \6, \3;"),
    ("picks summed in another order", _TWO_ADDS + r"\1, (%r\d+);", r"add.f32 \1, \2, \6;\4add.f32 \5, \1, \3;"),
]


def _edited(variant, field, old, new, count=1):
    """``variant`` with ``old`` replaced by ``new`` in its ``field`` (a regular expression when ``old`` is one)."""
    text = variant[field]
    edited = old.sub(new, text, count=count) if isinstance(old, re.Pattern) else text.replace(old, new, count)
    assert edited != text, f"the edit of {old!r} no longer applies"
    return {**variant, field: edited}


@pytest.mark.parametrize("name,pattern,replacement", FLOAT_MUTANTS, ids=[m[0] for m in FLOAT_MUTANTS])
def test_a_changed_float_emission_is_reported(name, pattern, replacement):
    mutated = _edited(compiled(False, True), "ptx", re.compile(pattern), replacement)
    assert CHECKS["float arithmetic"](mutated) != [], f"{name} went unnoticed"


# ---------------------------------------------------------------------------------------------- the wait

def _move_wait(ptx_text, after_load):
    """The PTX with griddepcontrol.wait moved just after the ``after_load``-th ld.global.v4 (0: before all)."""
    lines = [line for line in ptx_text.splitlines() if flow.WAIT not in line]
    loads = [i for i, line in enumerate(lines) if "ld.global.v4.f32" in line]
    at = loads[after_load - 1] + 1 if after_load else loads[0]
    return "\n".join(lines[:at] + [f"\t{flow.WAIT};"] + lines[at:])


@pytest.mark.parametrize("after_load", [0, 1, 3, 4], ids=lambda n: f"wait-after-{n}-loads")
def test_a_misplaced_wait_is_reported(after_load):
    real = compiled(False, True)
    assert CHECKS["load placement"]({**real, "ptx": _move_wait(real["ptx"], after_load)}) != []


def test_a_branch_after_the_wait_is_reported():
    """The row test (warp < rows, on %tid.x) moved after the wait: a lane-dependent branch there."""
    real = compiled(False, True)
    row_test = re.search(r"^\s*@(%p\d+) bra\s+(\$L__BB\d+_\d+);", real["ptx"], re.M)
    assert row_test.start() < real["ptx"].index(flow.WAIT)
    branched = _edited(real, "ptx", f"{flow.WAIT};", f"{flow.WAIT};\n\t@{row_test.group(1)} bra {row_test.group(2)};")
    assert CHECKS["branch after the wait"](branched) != []


def test_the_top8_fall_back_is_a_warp_uniform_branch():
    """The kernel without metadata has one guarded branch after the wait, to the exact rounds, on ballots alone."""
    ptx = compiled(False, True)["ptx"]
    assert len([b for b in flow.branches_after_wait(ptx) if b.predicate]) == 1
    assert flow.lane_dependent_branches_after_wait(ptx) == []


def _first_global_store(ptx_text):
    return re.search(r"^\s*st\.global\S*\s+\[[^\n]*;$", ptx_text, re.M).group(0).strip()


@pytest.mark.parametrize("metadata", [False, True], ids=["plain", "metadata"])
def test_a_global_write_before_the_wait_is_reported(metadata):
    real = compiled(metadata, True)
    store = _first_global_store(real["ptx"])
    problems = CHECKS["write placement"](_edited(real, "ptx", f"\t{flow.WAIT};", f"\t{store}\n\t{flow.WAIT};"))
    assert any(p.startswith("global write before the wait") for p in problems), problems


def test_a_global_write_after_launch_dependents_is_reported():
    real = compiled(True, True)
    store = _first_global_store(real["ptx"])
    problems = CHECKS["write placement"](_edited(real, "ptx", f"\t{flow.LAUNCH_DEPENDENTS};",
                                                 f"\t{flow.LAUNCH_DEPENDENTS};\n\t{store}"))
    assert any(p.startswith(f"global write after {flow.LAUNCH_DEPENDENTS}") for p in problems), problems


def test_an_exit_that_skips_launch_dependents_is_reported():
    problems = CHECKS["write placement"](_edited(compiled(True, True), "ptx", f"\t{flow.WAIT};",
                                                 f"\t{flow.WAIT};\n\t@%p1 ret;"))
    assert any(p.startswith("an exit is reachable") for p in problems), problems


def test_a_kernel_without_launch_dependents_or_writes_is_reported():
    real = compiled(True, True)
    problems = CHECKS["write placement"](_edited(real, "ptx", f"\t{flow.LAUNCH_DEPENDENTS};\n", ""))
    assert any(f"0 {flow.LAUNCH_DEPENDENTS}" in p for p in problems), problems
    no_stores = _edited(real, "ptx", re.compile(r"^\s*st\.global[^\n]*\n", re.M), "", count=0)
    assert "no global write after the wait" in CHECKS["write placement"](no_stores)


@pytest.mark.parametrize("old,new,wanted", [("ACQBULK", "NOP", "0 ACQBULK"),
                                            ("FMUL", "FFMA", "FFMA"),
                                            ("LDG.E.128", "LDG.E.64", "global loads before the wait")],
                         ids=["no-wait", "ffma", "narrow-load"])
def test_sass_without_its_wait_with_an_ffma_or_a_narrow_load_is_reported(old, new, wanted):
    problems = CHECKS["SASS loads and FFMA"](_edited(compiled(False, True), "sass", old, new))
    assert any(wanted in p for p in problems), problems


def test_sass_with_two_waits_is_reported():
    real = compiled(False, True)
    line = next(line for line in real["sass"].splitlines() if "ACQBULK" in line)
    problems = CHECKS["SASS loads and FFMA"](_edited(real, "sass", line, f"{line}\n{line}"))
    assert any("2 ACQBULK" in p for p in problems), problems


# ---------------------------------------------------------------------------------------------- the rest

@pytest.mark.parametrize("field,value", [("local_bytes", 8), ("stack_bytes", 16), ("registers", 256)])
def test_spills_and_too_many_registers_are_reported(field, value):
    real = compiled(False, True)
    assert CHECKS["resources"]({**real, "resources": {**real["resources"], field: value}}) != []


@pytest.mark.parametrize("metadata", [False, True])
@pytest.mark.parametrize("edit", [", 2, 1", ", 1, 2", "0, 1, 1"], ids=["y", "z", "x"])
def test_a_block_of_another_shape_is_reported(metadata, edit):
    """A second or third block dimension (every thread run twice), or another thread count, is reported; the
    real block's ``.reqntid N, 1, 1`` spelled ``.reqntid N`` passes."""
    real = compiled(metadata, True)
    line = next(line for line in real["ptx"].splitlines() if ".reqntid" in line)
    plain = line.split(",")[0]
    assert CHECKS["block shape"](_edited(real, "ptx", line, plain)) == []
    assert CHECKS["block shape"](_edited(real, "ptx", line, plain + edit)) != []


@pytest.mark.parametrize("metadata,tokens,barrier", [(False, 0, "bar.warp.sync"), (True, 0, "bar.sync"),
                                                      (True, 2, "bar.sync")],
                         ids=["scores", "route words", "picks"])
def test_a_shared_store_read_with_no_barrier_between_is_reported(metadata, tokens, barrier):
    """Each barrier between a shared store and the loads of other threads removed in turn, the check names the
    unordered pair: the warp's scores, the zeroed route words, a token's picks for the other."""
    real = compiled(metadata, True, tokens)
    lines = [line for line in real["ptx"].splitlines() if line.strip().startswith(barrier + " ")]
    assert lines, f"no {barrier} in the variant"
    for line in lines:
        problems = CHECKS["shared memory order"](_edited(real, "ptx", line + "\n", ""))
        assert problems and "no barrier between them" in problems[0], line


def test_sorting_network_sorts_every_zero_one_input():
    """By the 0-1 principle, sorting all 2^8 binary inputs proves the network sorts any input."""
    assert codegen_checks.network_problems() == [] and codegen_checks.source_problems() == []


@pytest.mark.parametrize("position", range(len(SORT8)))
def test_a_network_with_one_comparator_moved_or_dropped_is_reported(position):
    """Each comparator is needed (the network is optimal), and one moved to a neighbouring wire breaks it."""
    i, j = SORT8[position]
    assert codegen_checks.network_problems(SORT8[:position] + SORT8[position + 1:])
    moved = [(a, b) for a, b in ((i - 1, j), (i, j - 1), (i + 1, j), (i, j + 1)) if 0 <= a < b < 8]
    assert any(codegen_checks.network_problems(SORT8[:position] + ((a, b),) + SORT8[position + 1:])
               for a, b in moved)


def test_kernels_lists_exactly_the_kernels_route_launches(monkeypatch):
    """prepare() readies KERNELS and the static tier checks it: a kernel route launches that it leaves out, or one
    it lists that route never launches, is reported (a refused capture, or an unchecked variant, otherwise)."""
    assert codegen_checks.kernel_set_problems() == []
    kernels = routing.KERNELS
    for edited, words in ((kernels[:-1], "does not list"), (kernels[:-1] + ((True, 3),), "never launches"),
                          (kernels + kernels[-1:], "twice")):
        monkeypatch.setattr(routing, "KERNELS", edited)
        problems = codegen_checks.kernel_set_problems()
        assert problems and any(words in p for p in problems), (edited, problems)
        assert any(p.startswith("kernels: ") for p in codegen_checks.source_problems())


def test_float_constants_are_the_float32_values():
    assert codegen_checks.constant_problems() == []


def test_a_wrong_constant_is_reported(monkeypatch):
    monkeypatch.setattr(routing, "RENORM_EPS", routing.Imm(int(np.float32(1e-20).view(np.uint32))))
    assert codegen_checks.constant_problems() != []


# ---------------------------------------------------------------------------------------------- the launcher

def _tensor_typed_ptx(metadata, folder):
    """The PTX of the variant launched with fake torch-tensor arguments, as TVM-FFI once took route's tensors:
    the layouts its signature check assumed (symbolic rows, a logits row stride of 4 elements' multiple)."""
    rows, variant = cute.sym_int(), routing.Routing(metadata, True, 0)
    args = [make_fake_tensor(Float32, (rows, EXPERTS), stride=(cute.sym_int64(divisibility=4), 1),
                             assumed_align=TENSOR_ALIGN),
            make_fake_tensor(Float32, (EXPERTS,), stride=(1,), assumed_align=TENSOR_ALIGN),
            make_fake_tensor(Int32, (rows, TOP_K), stride=(TOP_K, 1), assumed_align=4),
            make_fake_tensor(Float32, (rows, TOP_K), stride=(TOP_K, 1), assumed_align=4), Float32(1.0)]
    if metadata:
        args += [make_fake_tensor(Int32, (cute.sym_int(),), stride=(1,), assumed_align=TENSOR_ALIGN),
                 Int32(0), Int32(EXPERTS), Int32(1), Int32(0)]
    args.append(make_fake_stream(use_tvm_ffi_env_stream=True))
    launcher = variant.launch_metadata if metadata else variant.launch_plain
    return cute.compile(launcher, *args, options=f"--enable-tvm-ffi --keep-ptx --dump-dir={folder} "
                                                 "--gpu-arch=sm_90a").__ptx__


@pytest.mark.parametrize("metadata", (False, True))
def test_the_kernel_launched_from_addresses_is_the_kernel_of_the_tensor_typed_launch(metadata, tmp_path):
    """route's launchers take addresses and extents and build the tensors themselves: the kernel they launch is
    the one a launch of tensors with the checked layouts compiles to, instruction for instruction."""
    def code(ptx):
        return [line for line in ptx.splitlines() if not line.lstrip().startswith((".loc", ".file", "//"))]

    launched = codegen_checks.artifacts(metadata, True)[0]
    assert ".entry" in launched and code(launched) == code(_tensor_typed_ptx(metadata, tmp_path))
