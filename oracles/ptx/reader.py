"""PTX text -> its instructions in program order and the instruction index each label names.

The body of the text's first ``.entry`` is read (the whole text when it has none, for snippets): comments,
directives (``.reg``, ``.loc``, ...) and braces are dropped; a label names the instruction that follows it.
"""

import re
from dataclasses import dataclass

_LABEL = re.compile(r"^([$\w]+):\s*")
_OPENERS = "{}() \t\n"
# Opcodes whose first operand is no register they write.
NO_DESTINATION = frozenset({"st", "bra", "ret", "exit", "bar", "barrier", "membar", "fence", "red", "prefetch",
                            "trap", "call", "cp", "griddepcontrol", "mbarrier"})
REGISTER = re.compile(r"%[\w$]+")


@dataclass(frozen=True)
class Instruction:
    """One PTX instruction: its position among the body's instructions, opcode with its modifiers (e.g.
    ``div.full.f32``), operands as written (destination first), and its guard (``@%p1``, ``@!%p2``) or None."""

    index: int
    opcode: str
    operands: tuple
    predicate: str | None = None

    @property
    def base(self):
        """The opcode without modifiers, e.g. ``ld`` for ``ld.global.v4.f32``."""
        return self.opcode.split(".")[0]

    @property
    def destinations(self):
        """The registers it writes: those of its first operand (one, a {vector} or a p|q pair of predicates)."""
        if self.base in NO_DESTINATION or not self.operands:
            return ()
        return tuple(REGISTER.findall(self.operands[0]))

    @property
    def types(self):
        """The opcode's modifiers as a set, e.g. {"global", "v4", "f32"}."""
        return set(self.opcode.split(".")[1:])


@dataclass(frozen=True)
class Program:
    """The instructions of a PTX body in text order and the instruction index each label names."""

    instructions: tuple
    labels: dict


def split_operands(text):
    """Split operands on commas outside braces and brackets."""
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _body(ptx):
    """The text between the braces of the first .entry (the whole text without one), comments and directive
    lines dropped."""
    text = re.sub(r"/\*.*?\*/", " ", ptx, flags=re.S)
    text = "\n".join(line.split("//")[0].strip() for line in text.splitlines())
    if ".entry" in text:
        start = text.index("{", text.index(")", text.index(".entry")))
        depth = 0
        for end in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                text = text[start + 1:end]
                break
        else:
            raise ValueError("unbalanced braces in the PTX entry")
    return "\n".join(line for line in text.splitlines() if line and not line.startswith("."))


def parse(ptx: str) -> Program:
    """The instructions and labels of the PTX's first entry (see the module docstring)."""
    instructions, labels = [], {}
    for statement in _body(ptx).split(";"):
        text = statement.lstrip(_OPENERS).strip()
        while (label := _LABEL.match(text)) is not None:
            labels[label.group(1)] = len(instructions)
            text = text[label.end():].lstrip(_OPENERS).strip()
        if not text or text.startswith("."):
            continue
        predicate = None
        if text.startswith("@"):
            predicate, text = text.split(None, 1)
        opcode, _, rest = " ".join(text.split()).partition(" ")
        operands = tuple(part.strip() for part in split_operands(rest) if part.strip()) if rest else ()
        instructions.append(Instruction(len(instructions), opcode, operands, predicate))
    return Program(tuple(instructions), labels)


def instructions(ptx: str) -> tuple:
    """The instructions of the PTX's first entry in text order."""
    return parse(ptx).instructions
