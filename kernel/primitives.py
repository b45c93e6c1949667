"""Hardware primitives of the routing kernel: one small function per PTX instruction (a compare-exchange: its
three), as inline assembly.

Float arithmetic goes through inline assembly so that neither LLVM nor NVVM can contract, reassociate or
rewrite it (the DSL's own ``x * 2.0`` comes out as ``add.f32``): each function below emits exactly the
instruction Triton 3.6.0 emits for the same expression. Float asm is pure (no side effects): only its data
dependencies order it, which fixes every result bit. The global loads and stores order memory around
``griddepcontrol.wait`` and the shared ones around the warp's and the block's barriers, so they are volatile
and clobber memory.

An operand is either a DSL value (a register) or an ``Imm``, which is printed into the instruction as a
PTX float literal, as Triton prints its constants.
"""

from dataclasses import dataclass

from cutlass import Float32, Int32, Int64, Uint64
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op


@dataclass(frozen=True)
class Imm:
    """A float32 constant given by its bit pattern, emitted as the PTX literal ``0fXXXXXXXX``."""

    bits: int

    def __post_init__(self):
        if not 0 <= self.bits <= 0xFFFFFFFF:
            raise ValueError(f"Imm bits must fit in 32 bits, got {self.bits:#x}")

    @property
    def literal(self) -> str:
        return f"0f{self.bits:08X}"


def _f32_asm(opcode: str, operands, loc, ip) -> Float32:
    """Emit ``opcode $0, <operands>;`` returning one f32; Imm operands become literals, the rest registers."""
    text, values = [], []
    for operand in operands:
        if isinstance(operand, Imm):
            text.append(operand.literal)
        else:
            values.append(Float32(operand).ir_value(loc=loc, ip=ip))
            text.append(f"${len(values)}")
    constraints = ",".join(["=f"] + ["f"] * len(values))
    result = llvm.inline_asm(T.f32(), values, f"{opcode} $0, {', '.join(text)};", constraints,
                             has_side_effects=False, is_align_stack=False,
                             asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip)
    return Float32(result)


@dsl_user_op
def sub_f32(a, b, *, loc=None, ip=None) -> Float32:
    """``sub.f32``: a - b, round to nearest even, subnormals kept."""
    return _f32_asm("sub.f32", (a, b), loc, ip)


@dsl_user_op
def add_f32(a, b, *, loc=None, ip=None) -> Float32:
    """``add.f32``: a + b, round to nearest even, subnormals kept."""
    return _f32_asm("add.f32", (a, b), loc, ip)


@dsl_user_op
def mul_f32(a, b, *, loc=None, ip=None) -> Float32:
    """``mul.f32``: a * b, round to nearest even, subnormals kept."""
    return _f32_asm("mul.f32", (a, b), loc, ip)


@dsl_user_op
def ex2_approx_f32(a, *, loc=None, ip=None) -> Float32:
    """``ex2.approx.f32`` (no .ftz): the MUFU.EX2 approximation of 2^a with subnormal results kept."""
    return _f32_asm("ex2.approx.f32", (a,), loc, ip)


@dsl_user_op
def div_full_f32(a, b, *, loc=None, ip=None) -> Float32:
    """``div.full.f32``: a * MUFU.RCP(b) with range scaling, no Newton step (what Triton emits for a / b)."""
    return _f32_asm("div.full.f32", (a, b), loc, ip)


@dsl_user_op
def ld_global_v4_f32(address: Int64, *, loc=None, ip=None) -> tuple:
    """``ld.global.v4.f32``: four floats from a 16-byte aligned global address, in program order."""
    struct = llvm.StructType.get_literal([T.f32()] * 4)
    result = llvm.inline_asm(struct, [Int64(address).ir_value(loc=loc, ip=ip)],
                             "ld.global.v4.f32 {$0, $1, $2, $3}, [$4];", "=f,=f,=f,=f,l,~{memory}",
                             has_side_effects=True, is_align_stack=False,
                             asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip)
    return tuple(Float32(llvm.extractvalue(T.f32(), result, [i], loc=loc, ip=ip)) for i in range(4))


@dsl_user_op
def st_global_v4_b32(address: Int64, value: Int32, *, loc=None, ip=None) -> None:
    """``st.global.v4.b32``: ``value`` into four consecutive words at a 16-byte aligned global address."""
    llvm.inline_asm(None, [Int64(address).ir_value(loc=loc, ip=ip), Int32(value).ir_value(loc=loc, ip=ip)],
                    "st.global.v4.b32 [$0], {$1, $1, $1, $1};", "l,r,~{memory}",
                    has_side_effects=True, is_align_stack=False,
                    asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip)


@dsl_user_op
def st_shared_v4_f32(address: Int32, values, *, loc=None, ip=None) -> None:
    """``st.shared.v4.f32``: four floats to a 16-byte aligned shared address, in program order."""
    operands = [Int32(address).ir_value(loc=loc, ip=ip)] + [Float32(v).ir_value(loc=loc, ip=ip) for v in values]
    llvm.inline_asm(None, operands, "st.shared.v4.f32 [$0], {$1, $2, $3, $4};", "r,f,f,f,f,~{memory}",
                    has_side_effects=True, is_align_stack=False,
                    asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip)


@dsl_user_op
def compare_exchange_u64(a, b, *, loc=None, ip=None) -> tuple:
    """(max, min) of two unsigned 64-bit words from one ``setp.gt.u64`` and two ``selp.b64`` on its predicate
    (LLVM would rewrite the pair as umax and umin, each with a comparison of its own)."""
    struct = llvm.StructType.get_literal([T.i64()] * 2)
    result = llvm.inline_asm(struct, [Uint64(a).ir_value(loc=loc, ip=ip), Uint64(b).ir_value(loc=loc, ip=ip)],
                             "{ .reg .pred p; setp.gt.u64 p, $2, $3; selp.b64 $0, $2, $3, p; "
                             "selp.b64 $1, $3, $2, p; }", "=l,=l,l,l",
                             has_side_effects=False, is_align_stack=False,
                             asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip)
    return tuple(Uint64(llvm.extractvalue(T.i64(), result, [i], loc=loc, ip=ip)) for i in range(2))


@dsl_user_op
def ld_shared_f32(address: Int32, *, loc=None, ip=None) -> Float32:
    """``ld.shared.f32``: one float from a shared address, in program order (after the warp's barrier)."""
    return Float32(llvm.inline_asm(T.f32(), [Int32(address).ir_value(loc=loc, ip=ip)], "ld.shared.f32 $0, [$1];",
                                   "=f,r,~{memory}", has_side_effects=True, is_align_stack=False,
                                   asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip))
