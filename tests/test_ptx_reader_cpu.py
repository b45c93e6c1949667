"""oracles/ptx (reader, flow, sass) on small hand-written PTX whose answers are known, so the kernel's static
checks (and the gate that reuses the reader) can fail."""

from oracles.ptx import flow, sass
from oracles.ptx.reader import parse

PTX = """
//
// hand-written
.version 8.7
.target sm_90a
.address_size 64

.visible .entry k(
	.param .align 8 .b8 k_param_0[16],
	.param .u64 k_param_1
)
.reqntid 256, 1, 1
{
	.reg .b32 	%r<12>;
	.loc	1 2 3
	ld.param.u64 	%rd1, [k_param_0];
	ld.param.u64 	%rd2, [k_param_1];
	ld.global.v4.f32 {%r1, %r2, %r3, %r4}, [%rd2];
	setp.eq.s32 	%p1, %r1, 0;
	@%p1 bra 	$L__BB0_2;
	// begin inline asm
	griddepcontrol.wait;
	// end inline asm
	add.s64 	%rd3, %rd1, 16;
	ld.global.f32 	%r5, [%rd3+4];
	sub.f32 %r6, 0f00000000, %r5;
	fma.rn.f32 	%r7, %r6, %r1, %r2;
	@%p1 bra 	$L__BB0_9;
$L__BB0_2:
	griddepcontrol.launch_dependents;
	ret;
$L__BB0_9:
	ld.global.f32 	%r8, [%rd1];
	st.global.f32 	[%rd1], %r8;
	bra.uni 	$L__BB0_2;

}
	.section	.debug_abbrev
	{
.b8 1
	}
"""


def test_loads_are_placed_on_the_control_flow_and_traced_to_parameters():
    loads = flow.global_loads(PTX)
    summary = [(load.instruction.opcode, sorted(load.params), load.before_wait, load.after_wait) for load in loads]
    assert summary == [("ld.global.v4.f32", [1], True, False),
                       ("ld.global.f32", [0], False, True),
                       ("ld.global.f32", [0], False, True)]  # after ret in the text, yet after the wait


def test_branches_after_the_wait_include_blocks_laid_out_after_ret():
    branches = flow.branches_after_wait(PTX)
    assert [(b.opcode, b.operands) for b in branches] == [("bra", ("$L__BB0_9",)), ("bra.uni", ("$L__BB0_2",))]


UNIFORM_PTX = """
.visible .entry u(
	.param .u32 u_param_0
)
{
	ld.param.u32 	%r1, [u_param_0];
	mov.u32 	%r2, %tid.x;
	setp.lt.u32 	%p1, %r2, %r1;
	mov.u32 	%r6, 1;
	griddepcontrol.wait;
	ld.global.u32 	%r3, [%rd1];
	setp.eq.s32 	%p2, %r3, 0;
	vote.sync.ballot.b32 	%r4, %p2, -1;
	and.b32 	%r5, %r4, 7;
	setp.ne.s32 	%p3, %r5, 0;
	setp.gt.u32 	%p4, %r1, 4;
	@%p1 mov.u32 	%r7, 2;
	setp.eq.s32 	%p5, %r7, 2;
	shfl.sync.idx.b32 	%r8, %r1, 0, 31, -1;
	setp.eq.s32 	%p7, %r8, 0;
	redux.sync.max.u32 	%r9, %r3, %r10;
	setp.eq.s32 	%p8, %r9, 0;
	@%p1 bra 	$L__BB0_1;
	@%p2 bra 	$L__BB0_1;
	@%p3 bra 	$L__BB0_1;
	@!%p4 bra 	$L__BB0_1;
	@%p5 bra 	$L__BB0_1;
	mov.u32 	%r6, 3;
	setp.eq.s32 	%p6, %r6, 1;
	@%p6 bra 	$L__BB0_1;
	@%p7 bra 	$L__BB0_1;
	@%p8 bra 	$L__BB0_1;
	bra.uni 	$L__BB0_1;
$L__BB0_1:
	ret;
}
"""


def test_warp_uniform_registers_come_from_ballots_reductions_and_parameters_alone():
    uniform = flow.warp_uniform_registers(parse(UNIFORM_PTX))
    assert {"%r1", "%r4", "%r5", "%p3", "%p4", "%r9", "%p8"} <= uniform
    # %tid.x, a global load, a guard on a lane-dependent predicate, two writes, a shuffle
    assert not {"%r2", "%p1", "%r3", "%p2", "%r7", "%p5", "%r6", "%p6", "%r8", "%p7"} & uniform


def test_lane_dependent_branches_after_the_wait_are_those_on_lane_dependent_guards():
    branches = flow.lane_dependent_branches_after_wait(UNIFORM_PTX)
    assert [b.predicate for b in branches] == ["@%p1", "@%p2", "@%p5", "@%p6", "@%p7"]


def test_reachability_stops_at_the_named_opcode():
    program = parse(PTX)
    before, after = flow.wait_regions(program)
    launch = next(i.index for i in program.instructions if i.opcode == flow.LAUNCH_DEPENDENTS)
    store = next(i.index for i in program.instructions if i.opcode == "st.global.f32")
    assert launch in before and launch in after
    assert store in after and store not in before
    assert store not in flow.reachable(program, launch)


def test_sass_opcodes_drop_predicates_and_operands():
    text = """
        /*0130*/                   LDG.E.128 R8, desc[UR4][R12.64] ;       /* 0x000000040c087981 */
        /*0150*/                   ACQBULK ;                               /* 0x000000000000782e */
        /*02d0*/              @!P2 FMUL R16, R16, 0.5 ;                    /* 0x3f0000001010a820 */
    """
    assert sass.sass_opcodes(text) == ["LDG.E.128", "ACQBULK", "FMUL"]


def test_an_instruction_names_the_registers_it_writes():
    """One register, a {vector}, a p|q pair of predicates; nothing for a store, a branch or a barrier."""
    program = parse("""
        ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];
        setp.lt.f32 %p1|%p2, %f1, %f2;
        add.f32 %f5, %f1, %f2;
        st.global.f32 [%rd2], %f5;
        bar.sync 0;
        @%p1 bra $L__BB0_1;
    $L__BB0_1:
        ret;
    """)
    assert [ins.destinations for ins in program.instructions] == [
        ("%f1", "%f2", "%f3", "%f4"), ("%p1", "%p2"), ("%f5",), (), (), (), ()]
