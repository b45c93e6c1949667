"""The float arithmetic of a PTX kernel, read off its text: the ordered op list and its expression trees.

A "float op" is an instruction that computes a new float value (add, sub, mul, fma, div, ex2, rcp, cvt...);
selections and comparisons (mov, selp, setp, min, max, shuffles) only move or compare values and are not
float ops. Operands are resolved through register copies (`mov` of a register or an immediate), so
`mov.b32 %r1, 0f3F800000; add.f32 %r2, %r3, %r1` reads as add.f32(%r3, 0f3F800000).

Expression trees are canonical strings: `opcode(arg, ...)`, with the operands of commutative ops (add,
mul, and the two factors of fma/mad) sorted, float immediates as `0fXXXXXXXX`, and every value not
computed by a float op named for what it is (oracles/ptx/leaves.py: `logits[3]`, `scale`, `exchanged[2]`,
LEAF for anything else). Two kernels compute the same float arithmetic when their root trees (values no
float op consumes: stored, compared, selected) agree.
"""

import collections
import dataclasses
import re

from oracles.ptx.leaves import LEAF, leaf_names
from oracles.ptx.reader import instructions

FLOAT_TYPES = frozenset({"f16", "f16x2", "bf16", "bf16x2", "f32", "f32x2", "f64"})
VALUE_OPS = frozenset({"add", "sub", "mul", "mad", "fma", "div", "rcp", "sqrt", "rsqrt", "ex2", "lg2", "sin",
                       "cos", "tanh", "neg", "abs", "copysign", "cvt"})
_COMMUTATIVE = frozenset({"add", "mul"})
_FUSED = frozenset({"fma", "mad"})
_FLOAT_IMMEDIATE = re.compile(r"^0[fF][0-9a-fA-F]{8}$")
_REGISTER_OR_SYMBOL = re.compile(r"%?[A-Za-z_$][\w$]*")  # what a mov may copy besides an immediate


@dataclasses.dataclass(frozen=True)
class FloatOp:
    """A float op: opcode with modifiers, destination register, sources resolved through copies."""
    opcode: str
    dst: str
    srcs: tuple
    predicate: str = None


def _base(opcode):
    return opcode.split(".", 1)[0]


def is_float_op(opcode: str) -> bool:
    """Whether an opcode computes a float value (see the module docstring)."""
    parts = opcode.split(".")
    return parts[0] in VALUE_OPS and any(p in FLOAT_TYPES for p in parts[1:])


def _copy_sources(program):
    """Register -> what it copies, for `mov` destinations written exactly once."""
    writes = collections.Counter(r for ins in program for r in ins.destinations)
    copies = {}
    for ins in program:
        if ins.base == "mov" and ins.predicate is None and len(ins.operands) == 2:
            dst, src = ins.operands
            if writes[dst] == 1 and (_FLOAT_IMMEDIATE.match(src) or _REGISTER_OR_SYMBOL.fullmatch(src)):
                copies[dst] = src
    return copies, writes


def _resolve(operand, copies):
    """Follow register copies to their origin; float immediates are normalized to 0fXXXXXXXX."""
    seen = set()
    while operand in copies and operand not in seen:
        seen.add(operand)
        operand = copies[operand]
    if _FLOAT_IMMEDIATE.match(operand):
        return "0f" + operand[2:].upper()
    return operand


def float_ops(ptx: str) -> tuple:
    """The float ops of the PTX in program order, sources resolved through copies.

    Raises ValueError if a float op's destination is written more than once: the trees assume SSA form.
    """
    program = instructions(ptx)
    copies, writes = _copy_sources(program)
    ops = []
    for ins in program:
        if not is_float_op(ins.opcode):
            continue
        dst, *srcs = ins.operands
        if writes[dst] != 1:
            raise ValueError(f"PTX register {dst} ({ins.opcode}) is written {writes[dst]} times; "
                             "float-op trees need each float result written once")
        ops.append(FloatOp(ins.opcode, dst, tuple(_resolve(s, copies) for s in srcs), ins.predicate))
    return tuple(ops)


def expression(opcode: str, *args: str) -> str:
    """Canonical tree string of one op applied to argument trees (commutative operands sorted)."""
    base = _base(opcode)
    if base in _COMMUTATIVE:
        args = tuple(sorted(args))
    elif base in _FUSED:
        args = tuple(sorted(args[:2])) + tuple(args[2:])
    return f"{opcode}({', '.join(args)})"


def float_immediate(bits: int) -> str:
    """The tree string of a float32 immediate given its bit pattern."""
    return f"0f{bits:08X}"


def expression_roots(ptx: str, params=()) -> collections.Counter:
    """Counter of the canonical trees of every float op whose result no float op consumes, leaves named by
    oracles/ptx/leaves.py (``params``: the kernel's parameter names by index)."""
    ops = float_ops(ptx)
    by_dst = {op.dst: op for op in ops}
    consumed = {s for op in ops for s in op.srcs}
    used = {s for s in consumed if s not in by_dst and not _FLOAT_IMMEDIATE.match(s)}
    names = leaf_names(ptx, used, params)
    memo = {}

    def tree(operand):
        if operand in memo:
            return memo[operand]
        op = by_dst.get(operand)
        if op is not None:
            result = expression(op.opcode, *(tree(s) for s in op.srcs))
        elif _FLOAT_IMMEDIATE.match(operand):
            result = operand
        else:
            result = names[operand]
        memo[operand] = result
        return result

    return collections.Counter(tree(op.dst) for op in ops if op.dst not in consumed)
