"""Static reading of a kernel's PTX (and SASS) around ``griddepcontrol.wait``: its control flow, the global
loads with the kernel parameters their addresses derive from, the branches after the wait, and the
cubin's resources. Plain Python over text, no GPU and no DSL needed. (The float arithmetic is read by
``oracles.ptx_float_ops``, shared with the Triton oracle's checks.)
"""

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from oracles.ptx_float_ops import split_operands

WAIT = "griddepcontrol.wait"
LAUNCH_DEPENDENTS = "griddepcontrol.launch_dependents"
_PARAM = re.compile(r"_param_(\d+)\b")
_REGISTER = re.compile(r"%[a-z]+\d+")


@dataclass(frozen=True)
class Instruction:
    index: int           # position among the entry's instructions
    predicate: str       # "@%p1", "@!%p2" or ""
    opcode: str          # e.g. "add.f32", "ld.global.v4.f32"
    operands: tuple      # operand strings as written, destination first

    @property
    def base(self):
        return self.opcode.split(".")[0]

    @property
    def types(self):
        return set(self.opcode.split(".")[1:])


@dataclass(frozen=True)
class Program:
    """The instructions of a PTX entry in text order and the instruction index each label names."""

    instructions: tuple
    labels: dict


def _entry_body(ptx: str) -> str:
    """The text between the braces of the PTX's first .entry, comments and debug directives dropped."""
    lines = [line.split("//")[0].strip() for line in ptx.splitlines()]
    # The debug directives .loc and .file carry no semicolon: drop them whole.
    text = "\n".join(line for line in lines if not line.startswith((".loc", ".file")))
    start = text.index("{", text.index(")", text.index(".entry")))
    depth = 0
    for end in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            return text[start + 1:end]
    raise ValueError("unbalanced braces in the PTX entry")


def parse(ptx: str) -> Program:
    """Parse the PTX's kernel body (comments and directives dropped; one entry expected)."""
    insts, labels = [], {}
    for statement in _entry_body(ptx).split(";"):
        text = " ".join(statement.split())
        while (label := re.match(r"^([$\w]+):", text)) is not None:
            labels[label.group(1)] = len(insts)
            text = text[label.end():].strip()
        text = text.lstrip("{}").strip()
        if not text or text.startswith((".", "}")):
            continue
        predicate = ""
        if text.startswith("@"):
            predicate, text = text.split(None, 1)
        opcode, _, rest = text.partition(" ")
        insts.append(Instruction(len(insts), predicate, opcode, tuple(part.strip() for part in split_operands(rest) if part.strip())))
    return Program(tuple(insts), labels)


def instructions(ptx: str):
    """The instructions of the PTX's kernel body in text order."""
    return list(parse(ptx).instructions)


def _successors(program: Program, inst: Instruction):
    if inst.base in ("ret", "exit", "trap"):
        return [] if not inst.predicate else [inst.index + 1]
    if inst.base == "bra":
        target = [program.labels[inst.operands[0]]]
        return target if not inst.predicate else target + [inst.index + 1]
    return [inst.index + 1]


def reachable(program: Program, start: int, stop_opcode: str | None = None) -> set:
    """Indices of the instructions that control can reach from instruction ``start`` (itself included),
    never passing through an instruction whose opcode is ``stop_opcode``."""
    seen, todo = set(), [start]
    while todo:
        index = todo.pop()
        if index in seen or index >= len(program.instructions):
            continue
        inst = program.instructions[index]
        seen.add(index)
        if inst.opcode == stop_opcode and index != start:
            seen.discard(index)
            continue
        todo.extend(_successors(program, inst))
    return seen


def _destinations(inst):
    """The registers an instruction writes: its first operand, a register or a {vector} of them."""
    if not inst.operands:
        return []
    first = inst.operands[0]
    if first.startswith("{"):
        return _REGISTER.findall(first)
    return [first] if _REGISTER.fullmatch(first) else []


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
                for register in _REGISTER.findall(operand):
                    sources |= deps.get(register, set())
            for dst in _destinations(inst):
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
        address = _REGISTER.search(inst.operands[-1])
        address = address.group(0) if address else ""
        loads.append(GlobalLoad(inst, frozenset(deps.get(address, set())), inst.index in before,
                                inst.index in after))
    return loads


def branches_after_wait(ptx: str):
    """The branch instructions control can reach after ``griddepcontrol.wait``."""
    program = parse(ptx)
    _, after = wait_regions(program)
    return [program.instructions[i] for i in sorted(after) if program.instructions[i].base == "bra"]


# ---------------------------------------------------------------------------------------------- SASS

def cuobjdump() -> Path:
    """The cuobjdump shipped in Triton's wheel (a project dependency), else the one on PATH."""
    import triton

    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if bundled.exists():
        return bundled
    found = shutil.which("cuobjdump")
    if found is None:
        raise FileNotFoundError("no cuobjdump: neither in Triton's wheel nor on PATH")
    return Path(found)


def _run_cuobjdump(cubin: bytes, flag: str) -> str:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(cubin)
        return subprocess.run([str(cuobjdump()), flag, str(path)], check=True, capture_output=True,
                              text=True).stdout


def sass(cubin: bytes) -> str:
    """``cuobjdump -sass`` of a cubin."""
    return _run_cuobjdump(cubin, "-sass")


def sass_opcodes(sass_text: str):
    """The SASS opcodes in order (predicates and operands dropped), e.g. ['LDG.E.128', 'ACQBULK', ...]."""
    out = []
    for line in sass_text.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if m:
            out.append(m.group(2))
    return out


_RESOURCE_FIELDS = re.compile(r"(REG|STACK|SHARED|LOCAL):(\d+)")


def _resources(line: str) -> dict:
    """One kernel's fields of a cuobjdump --dump-resource-usage line."""
    fields = dict(_RESOURCE_FIELDS.findall(line))
    if len(fields) != 4:
        raise ValueError(f"unexpected cuobjdump resource line: {line!r}")
    return {"registers": int(fields["REG"]), "shared_bytes": int(fields["SHARED"]),
            "local_bytes": int(fields["LOCAL"]), "stack_bytes": int(fields["STACK"])}


def resource_usage(cubin: bytes) -> dict:
    """Registers, shared memory, local memory (spills) and stack of the cubin's kernel, from cuobjdump."""
    text = _run_cuobjdump(cubin, "--dump-resource-usage")
    lines = [line for line in text.splitlines() if "REG:" in line]
    if len(lines) != 1:
        raise ValueError(f"unexpected cuobjdump resource report:\n{text}")
    return _resources(lines[0])


def binary_resource_usage(path) -> dict:
    """{mangled kernel name: resource_usage fields} of every kernel in an ELF or fatbin file (a .so, a cubin)."""
    text = subprocess.run([str(cuobjdump()), "--dump-resource-usage", str(path)], check=True, capture_output=True,
                          text=True).stdout
    found = re.findall(r"Function (\S+):\s*\n(.*REG:.*)", text)
    if not found:
        raise ValueError(f"no kernel in cuobjdump's resource report of {path}:\n{text}")
    return {name: _resources(line) for name, line in found}
