"""A kernel's control flow around ``griddepcontrol.wait``, read off its PTX: what control can reach, the global
loads with the kernel parameters their addresses derive from, and the branches after the wait (with those whose
guard may differ between a warp's lanes)."""

import re
from collections import Counter
from dataclasses import dataclass

from oracles.ptx.reader import REGISTER, Instruction, Program, parse

WAIT = "griddepcontrol.wait"
LAUNCH_DEPENDENTS = "griddepcontrol.launch_dependents"
BARRIERS = frozenset({"bar.sync", "barrier.sync", "bar.warp.sync"})  # a CTA's threads, a warp's lanes
_PARAM = re.compile(r"_param_(\d+)\b")
_TOKEN = re.compile(r"%[\w$.]+|[A-Za-z_$][\w$.]*|\d\w*")
# One value in every lane of the warp, whatever their operands: votes and warp reductions.
WARP_UNIFORM_OPS = frozenset({"vote", "redux"})
# Values that may differ from lane to lane even from uniform operands: memory reads (a kernel parameter's
# aside), shuffles and matches.
LANE_VALUE_OPS = frozenset({"ld", "atom", "shfl", "match", "tex", "tld4", "suld"})


def _successors(program: Program, inst: Instruction):
    if inst.base in ("ret", "exit", "trap"):
        return [] if not inst.predicate else [inst.index + 1]
    if inst.base == "bra":
        target = [program.labels[inst.operands[0]]]
        return target if not inst.predicate else target + [inst.index + 1]
    return [inst.index + 1]


def reachable(program: Program, start: int, stop_opcode: str | frozenset | None = None) -> set:
    """Indices of the instructions that control can reach from instruction ``start`` (itself included),
    never passing through an instruction whose opcode is ``stop_opcode`` (or one of a set of them)."""
    stops = {stop_opcode} if isinstance(stop_opcode, str) else set(stop_opcode or ())
    seen, todo = set(), [start]
    while todo:
        index = todo.pop()
        if index in seen or index >= len(program.instructions):
            continue
        inst = program.instructions[index]
        seen.add(index)
        if inst.opcode in stops and index != start:
            seen.discard(index)
            continue
        todo.extend(_successors(program, inst))
    return seen


def _param_dependencies(insts):
    """For each register, the kernel parameter indices its value derives from (fixed point over loops)."""
    deps = {}
    changed = True
    while changed:
        changed = False
        for inst in insts:
            sources = set()
            for operand in inst.operands[1:]:
                sources |= {int(n) for n in _PARAM.findall(operand)}
                for register in REGISTER.findall(operand):
                    sources |= deps.get(register, set())
            for dst in inst.destinations:
                if not sources <= deps.get(dst, set()):
                    deps[dst] = deps.get(dst, set()) | sources
                    changed = True
    return deps


@dataclass(frozen=True)
class GlobalLoad:
    instruction: Instruction
    params: frozenset     # kernel parameter indices the address derives from
    before_wait: bool     # reachable from the entry without passing griddepcontrol.wait
    after_wait: bool      # reachable from griddepcontrol.wait


def wait_index(program: Program) -> int:
    """Index of the only ``griddepcontrol.wait`` (ValueError unless there is exactly one)."""
    waits = [inst.index for inst in program.instructions if inst.opcode == WAIT]
    if len(waits) != 1:
        raise ValueError(f"expected one {WAIT} in the PTX, found {len(waits)}")
    return waits[0]


def wait_regions(program: Program):
    """(instructions reachable before the wait, instructions reachable after it), over the control flow."""
    wait = wait_index(program)
    return reachable(program, 0, stop_opcode=WAIT), reachable(program, wait) - {wait}


def global_loads(ptx: str):
    """Every global (or generic) load of the kernel, with the kernel parameters its address derives from and
    where it stands relative to ``griddepcontrol.wait`` on the control flow."""
    program = parse(ptx)
    before, after = wait_regions(program)
    deps = _param_dependencies(program.instructions)
    loads = []
    for inst in program.instructions:
        if inst.base != "ld" or inst.types & {"param", "shared", "local", "const"}:
            continue
        address = REGISTER.search(inst.operands[-1])
        address = address.group(0) if address else ""
        loads.append(GlobalLoad(inst, frozenset(deps.get(address, set())), inst.index in before,
                                inst.index in after))
    return loads


def branches_after_wait(ptx: str):
    """The branch instructions control can reach after ``griddepcontrol.wait``."""
    program = parse(ptx)
    _, after = wait_regions(program)
    return [program.instructions[i] for i in sorted(after) if program.instructions[i].base == "bra"]


def _uniform_operand(operand, uniform):
    """Whether every token of an operand is the same in every lane: immediates, kernel parameter names and
    registers of ``uniform`` (a special register such as %tid.x or %laneid is none of them)."""
    for token in _TOKEN.findall(operand):
        if token.startswith("%"):
            if token not in uniform:
                return False
        elif not token[0].isdigit() and "_param_" not in token:
            return False
    return True


def warp_uniform_registers(program: Program) -> set:
    """Registers that hold one value in every lane of a warp: each written by a single instruction, unguarded
    or under a uniform predicate, that is a vote or a warp reduction, a kernel parameter's load, or another
    operation that reads no memory, no other lane and only uniform operands. A register written in two places
    (where control flow merges) is not, nor one read from a special register (fixed point over the body)."""
    writes = Counter(dst for inst in program.instructions for dst in inst.destinations)
    uniform = set()
    changed = True
    while changed:
        changed = False
        for inst in program.instructions:
            destinations = set(inst.destinations)
            if not destinations or destinations <= uniform or any(writes[d] != 1 for d in destinations):
                continue
            if inst.predicate and not _uniform_operand(inst.predicate, uniform):
                continue
            if inst.base in WARP_UNIFORM_OPS or (inst.base == "ld" and "param" in inst.types):
                same = True
            elif inst.base in LANE_VALUE_OPS:
                same = False
            else:
                same = all(_uniform_operand(operand, uniform) for operand in inst.operands[1:])
            if same:
                uniform |= destinations
                changed = True
    return uniform


def lane_dependent_branches_after_wait(ptx: str):
    """The guarded branches control can reach after ``griddepcontrol.wait`` whose guard may differ between the
    lanes of a warp (a guard on a ballot or a reduction alone is warp-uniform and not listed)."""
    program = parse(ptx)
    _, after = wait_regions(program)
    uniform = warp_uniform_registers(program)
    return [program.instructions[i] for i in sorted(after) if program.instructions[i].base == "bra"
            and program.instructions[i].predicate
            and not _uniform_operand(program.instructions[i].predicate, uniform)]
