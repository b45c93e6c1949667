"""What each value that no float op computes is, read off a kernel's PTX: the leaves of its float trees.

Two compilers lay the same computation out differently (which experts a thread holds, how an address is
formed, whether a pick travels through shared memory or an integer reduction), so a leaf is named by what
both share:

    logits[3]       the 4th lowest of the elements this thread loads from the parameter named ``logits``; the
                    addresses are evaluated for one thread (THREAD), so the name is the element, not the
                    order of the loads
    scale           a scalar parameter, by the name its index has in ``params`` (``param4`` without one;
                    ``logits+8`` for the word at byte 8 of a parameter that is a struct)
    exchanged[2]    a value that reaches the thread through warp exchanges (shfl, redux, vote): the 3rd
                    shallowest, by the most exchanges on one dependency path to it (round k of a top-k
                    exchanges more than round k - 1, whatever each compiler does inside a round)
    ?               anything else (LEAF)

Float immediates name themselves (float_ops.py).
"""

import collections
import dataclasses
import re

from oracles.ptx.reader import instructions

LEAF = "?"
THREAD = 1  # the %tid.x whose addresses are evaluated: lane 1 of warp 0, block 0 (lane 0 hides lane strides)
EXCHANGES = frozenset({"shfl", "redux", "vote", "match"})
_PARAM = re.compile(r"_param_(\d+)(?:\s*\+\s*(\d+))?\s*\]")
_ADDRESS = re.compile(r"^\[\s*(%[\w$]+)\s*(?:\+\s*(-?\d+))?\s*\]$")
_WIDTH = re.compile(r"(\d+)$")


@dataclasses.dataclass(frozen=True)
class Pointer:
    """A kernel parameter's pointer plus a byte offset."""
    param: int
    offset: int


def _integer(text):
    try:
        return int(text, 0)
    except ValueError:  # a register, a float immediate, a symbol
        return None


def _bits(opcode):
    """The width of an integer op's result from its last type modifier (u32 -> 32), 64 for mul.wide."""
    parts = opcode.split(".")
    if "wide" in parts:
        return 64
    width = _WIDTH.search(parts[-1])
    return int(width.group(1)) if width else 64


_INTEGER_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
                "shl": lambda a, b: a << b, "shr": lambda a, b: a >> b, "and": lambda a, b: a & b,
                "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b, "min": min, "max": max}


def _apply(opcode, args):
    """The value of an integer op on evaluated operands (unsigned, wrapped to the op's width), or None where
    it is not one of these ops or would need a sign; a Pointer survives adding or subtracting an integer."""
    parts = opcode.split(".")
    base, bits = parts[0], _bits(opcode)
    if "hi" in parts or (parts[-1].startswith("s") and base in ("shr", "cvt", "min", "max")
                         and any(isinstance(a, int) and a >> (bits - 1) for a in args)):
        return None  # the high half of a product, or a signed value whose sign would matter
    if base in ("mad", "mul") and any(a == 0 for a in args[:2]):  # anything times zero, even an unknown stride
        args = [0, 0, *args[2:]]
    if base == "mad" and len(args) == 3:
        base, args = "add", [_apply(".".join(["mul", *parts[1:]]), args[:2]), args[2]]
    if base in ("add", "sub") and len(args) == 2 and isinstance(args[0], Pointer) and isinstance(args[1], int):
        return Pointer(args[0].param, args[0].offset + (args[1] if base == "add" else -args[1]))
    if base == "add" and len(args) == 2 and isinstance(args[1], Pointer) and isinstance(args[0], int):
        return Pointer(args[1].param, args[1].offset + args[0])
    if not all(isinstance(a, int) for a in args):
        return None
    mask = (1 << bits) - 1
    if base in _INTEGER_OPS and len(args) == 2:
        return _INTEGER_OPS[base](*args) & mask
    if base in ("mov", "cvt") and len(args) == 1:
        return args[0] & mask
    return None


def _operand(text, values):
    """An operand's value for THREAD: a register's evaluated value, a special register, an integer, or None."""
    if text in values:
        return values[text]
    if text.startswith("%") and "." in text:  # %tid.x is THREAD; %ctaid.*, %tid.y and the rest are 0
        return THREAD if text == "%tid.x" else 0
    return _integer(text)


def _addresses(program):
    """Register -> its value for THREAD (int or Pointer), for registers written once, unguarded, by an op
    whose operands evaluate."""
    writes = collections.Counter(r for ins in program for r in ins.destinations)
    values = {}
    for ins in program:
        if len(ins.destinations) != 1 or writes[ins.destinations[0]] != 1 or ins.predicate:
            continue
        if ins.opcode.startswith("ld.param"):
            found = _PARAM.search(ins.operands[-1])
            if found and not found.group(2) and _bits(ins.opcode) == 64:  # a pointer is the 64 bits at offset 0
                values[ins.destinations[0]] = Pointer(int(found.group(1)), 0)
            continue
        value = _apply(ins.opcode, [_operand(s, values) for s in ins.operands[1:]])
        if value is not None:
            values[ins.destinations[0]] = value
    return values


def _loaded_elements(program, values):
    """Register -> (param, element index) for every register a global load writes at an evaluated address."""
    loaded = {}
    for ins in program:
        if ins.base != "ld" or ins.types & {"param", "shared", "local", "const"} or not ins.operands:
            continue
        found = _ADDRESS.match(ins.operands[-1])
        address = values.get(found.group(1)) if found else None
        if not isinstance(address, Pointer):
            continue
        word = _bits(ins.opcode) // 8
        start = address.offset + int(found.group(2) or 0)
        for i, register in enumerate(ins.destinations):
            loaded[register] = (address.param, (start + i * word) // word)
    return loaded


def _exchange_depths(program):
    """Register -> the most warp exchanges on one dependency path to it, in one pass in program order."""
    depth = {}
    for ins in program:
        sources = [r for operand in ins.operands[1 if ins.destinations else 0:]
                   for r in re.findall(r"%[\w$]+", operand)] + ([ins.predicate.lstrip("@!")] if ins.predicate else [])
        here = max((depth.get(r, 0) for r in sources), default=0) + (ins.base in EXCHANGES)
        for dst in ins.destinations:
            depth[dst] = max(depth.get(dst, 0), here)
    return depth


def element(param: str, rank: int) -> str:
    """The leaf name of the ``rank``-th lowest element a thread loads from parameter ``param``."""
    return f"{param}[{rank}]"


def exchanged(rank: int) -> str:
    """The leaf name of the ``rank``-th shallowest exchanged value."""
    return f"exchanged[{rank}]"


def leaf_names(ptx: str, used, params=()) -> dict:
    """Register -> the name of what it holds (see the module docstring), for the registers ``used`` as
    leaves; ``params`` names the kernel's parameters by index. Exchanged values are ranked among those used."""
    program = instructions(ptx)
    role = lambda k: params[k] if k < len(params) else f"param{k}"  # noqa: E731
    loaded = _loaded_elements(program, _addresses(program))
    elements = collections.defaultdict(set)
    for param, index in loaded.values():
        elements[param].add(index)
    names = {register: element(role(param), sorted(elements[param]).index(index))
             for register, (param, index) in loaded.items()}
    for ins in program:
        found = _PARAM.search(ins.operands[-1]) if ins.opcode.startswith("ld.param") and ins.operands else None
        if found and len(ins.destinations) == 1:
            names[ins.destinations[0]] = role(int(found.group(1))) + (f"+{found.group(2)}" if found.group(2) else "")
    depths = _exchange_depths(program)
    others = [r for r in used if r not in names and depths.get(r)]
    ranks = sorted({depths[r] for r in others})
    names.update({r: exchanged(ranks.index(depths[r])) for r in others})
    return {r: names.get(r, LEAF) for r in used}
