"""Kernel mutants generated from the kernel's own code: mutation operators applied at every site of the syntax
tree of kernel/routing.py, network.py, primitives.py and contract.py, never pinned to their text.

A mutant replaces the exact source segment of one node (its lineno/col_offset/end_lineno/end_col_offset), so
the rest of the file keeps its text. It is named by its site, ``<file stem>.<function>.<operator>.<ordinal>``:
the enclosing function's qualified name (``module`` outside any function), the operator, and the ordinal of
that operator's mutants within the function in source order. A refactor that renames a local or moves a
function regenerates the same names. A mutation that leaves the syntax tree unchanged (a no-op: swapping equal
arms) is not generated, nor one whose file is an earlier mutant's.

``generate(kernel_dir)`` gives every mutant of a kernel package, in a fixed order (file, then source
position, then operator): the same source gives the same set in the same order.
"""

import ast
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

TARGETS = ("routing.py", "network.py", "primitives.py", "contract.py")
CONTRACT_FILE = "contract.py"
MODULE = "module"  # the "function" of a site outside any function

COMPARE_FLIP, COMPARE_BOUNDARY = "compare_flip", "compare_boundary"
INT_PLUS_ONE, INT_MINUS_ONE = "int_plus_one", "int_minus_one"
BOUND_PLUS_ONE, BOUND_MINUS_ONE = "bound_plus_one", "bound_minus_one"
BIT_SWAP, BOOL_SWAP, SELECT_SWAP = "bit_swap", "bool_swap", "select_swap"
SYNC_REMOVED, SYNC_LATER, SYNC_EARLIER = "sync_removed", "sync_later", "sync_earlier"
PTX_SIBLING, SHUFFLE_LANE = "ptx_sibling", "shuffle_lane"
CHECK_REMOVED = "check_removed"
OPERATORS = {
    COMPARE_FLIP: "a comparison negated (< to >=, == to !=, in to not in)",
    COMPARE_BOUNDARY: "a comparison's boundary moved (< to <=, > to >=)",
    INT_PLUS_ONE: "an integer constant one larger",
    INT_MINUS_ONE: "an integer constant one smaller",
    BOUND_PLUS_ONE: "a loop bound, or an argument check's bound, one larger",
    BOUND_MINUS_ONE: "a loop bound, or an argument check's bound, one smaller",
    BIT_SWAP: "a bit operator swapped (& and |, ^ to |, << and >>)",
    BOOL_SWAP: "and and or swapped",
    SELECT_SWAP: "the arms of a select swapped (_select, cutlass.select_, x if c else y)",
    SYNC_REMOVED: "a barrier, fence or PDL wait removed (a call, or an inline asm's memory clobber)",
    SYNC_LATER: "a barrier or PDL wait moved after the next statement",
    SYNC_EARLIER: "a barrier or PDL wait moved before the previous statement",
    PTX_SIBLING: "an inline PTX instruction replaced by its sibling (add/sub, min/max, .rn/.rz, a setp's predicate)",
    SHUFFLE_LANE: "a shuffle's source lane changed (xor 1)",
    CHECK_REMOVED: "an argument check removed",
}

SYNC_CALLS = ("sync_threads", "sync_warp", "griddepcontrol_wait", "griddepcontrol_launch_dependents", "barrier",
              "fence_acq_rel_cta", "fence_proxy", "fence_view_async_shared", "mbarrier_wait")
MEMORY_CLOBBER = ",~{memory}"
SELECTS = ("_select", "select_")
SHUFFLES = ("shuffle_sync", "shuffle_sync_up", "shuffle_sync_down", "shuffle_sync_bfly")
LOOPS = ("range", "range_constexpr")
FLIPPED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "==",
           "is": "is not", "is not": "is", "in": "not in", "not in": "in"}
BOUNDARY = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
CMP_TOKEN = re.compile(r"not\s+in\b|is\s+not\b|\bin\b|\bis\b|<=|>=|==|!=|<|>")
BIT_TOKENS = {ast.BitAnd: ("&", "|"), ast.BitOr: ("|", "&"), ast.BitXor: ("^", "|"), ast.LShift: ("<<", ">>"),
              ast.RShift: (">>", "<<")}
# (pattern, replacement) of each PTX sibling, applied to each match in an instruction string on its own.
PTX_SIBLINGS = (
    (r"\badd(?=\.)", "sub"), (r"\bsub(?=\.)", "add"),
    (r"\bumax\b", "umin"), (r"\bumin\b", "umax"), (r"\bmax(?=\.)", "min"), (r"\bmin(?=\.)", "max"),
    (r"\.rn(?=\.)", ".rz"), (r"\.rz(?=\.)", ".rn"),
    (r"\b(add|sub|mul)\.f32\b", r"\1.rz.f32"),
    (r"\bdiv\.full\.f32\b", "div.rn.f32"), (r"\bdiv\.full\.f32\b", "div.approx.f32"),
    (r"\bex2\.approx\.f32\b", "ex2.approx.ftz.f32"),
    (r"\bsetp\.gt\b", "setp.ge"), (r"\bsetp\.gt\b", "setp.le"), (r"\bsetp\.lt\b", "setp.le"),
    (r"\bsetp\.lt\b", "setp.ge"),
    (r"\b(selp\.b\d+ \$\d+, )(\$\d+), (\$\d+)", r"\1\3, \2"),
)
PTX_STRING = re.compile(r"\b(add|sub|mul|div|ex2|setp|selp|fma|min|max|umax|umin)\b")


@dataclass(frozen=True)
class Mutant:
    """One generated mutant: the segment ``old`` of kernel/``target`` at (start, end) replaced by ``new``."""

    target: str
    function: str
    operator: str
    ordinal: int
    start: tuple  # (line, column) as ast gives them: 1-based line, 0-based UTF-8 byte column
    end: tuple
    old: str
    new: str

    kills = frozenset()  # no tier is declared: whichever tier can must kill it (runner.run_probe reads this)

    @property
    def name(self):
        return f"{Path(self.target).stem}.{self.function}.{self.operator}.{self.ordinal}"

    @property
    def site(self):
        return f"kernel/{self.target}:{self.start[0]}"

    @property
    def description(self):
        return f"{OPERATORS[self.operator]}: {self.old!r} -> {self.new!r} at {self.site}"

    @property
    def contract(self):
        """Whether it edits the host contract (probed by the contract tiers first)."""
        return self.target == CONTRACT_FILE

    def apply(self, text):
        """``text`` (the target's source) with the segment replaced; ValueError when it no longer holds it."""
        lines = text.splitlines(keepends=True)
        begin, finish = _offset(lines, self.start), _offset(lines, self.end)
        if text[begin:finish] != self.old:
            raise ValueError(f"{self.name}: the source at {self.site} is no longer {self.old!r}")
        return text[:begin] + self.new + text[finish:]


def _offset(lines, position):
    """The character offset of an ast (line, UTF-8 byte column) position in the text of ``lines``."""
    line, column = position
    return sum(len(x) for x in lines[:line - 1]) + len(lines[line - 1].encode()[:column].decode())


def digest(sources):
    """sha256 of a kernel package's files ({name: text}): a mutant's identity for reusing its results."""
    h = hashlib.sha256()
    for name in sorted(sources):
        h.update(name.encode() + b"\0" + sources[name].encode() + b"\0")
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------- finding sites

class _Sites(ast.NodeVisitor):
    """Every (function, operator, start, end, old, new) candidate of one file, in no particular order."""

    def __init__(self, text, target):
        self.text, self.lines, self.target = text, text.splitlines(keepends=True), target
        self.scope, self.found, self.skip = [], [], set()

    # ---- helpers
    def segment(self, start, end):
        return self.text[_offset(self.lines, start):_offset(self.lines, end)]

    def add(self, operator, start, end, new):
        old = self.segment(start, end)
        if new != old:
            self.found.append((".".join(self.scope) or MODULE, operator, start, end, old, new))

    def node_add(self, operator, node, new):
        self.add(operator, _start(node), _end(node), new)

    def node_text(self, node):
        return self.segment(_start(node), _end(node))

    def token_between(self, left, right, pattern):
        """(start, end, token) of the first match of ``pattern`` between two nodes (an operator has no position)."""
        gap = self.segment(_end(left), _start(right))
        match = pattern.search(gap)
        if match is None:
            return None
        base = _offset(self.lines, _end(left))
        return self._position(base + match.start()), self._position(base + match.end()), match.group(0)

    def _position(self, offset):
        line = 0
        while offset >= len(self.lines[line]):
            offset -= len(self.lines[line])
            line += 1
        return line + 1, len(self.lines[line][:offset].encode())

    def swap(self, operator, first, second):
        if ast.dump(first) == ast.dump(second):
            return  # equal arms or statements: a no-op
        between = self.segment(_end(first), _start(second))
        self.add(operator, _start(first), _end(second), self.node_text(second) + between + self.node_text(first))

    # ---- scopes and what is not code
    def _function(self, node):
        self.scope.append(node.name)  # its decorators and defaults are its sites too, so a move keeps their names
        for decorator in node.decorator_list:
            self.visit(decorator)
        for default in node.args.defaults + node.args.kw_defaults:
            if default is not None:
                self.visit(default)
        body = node.body[1:] if _docstring(node) else node.body
        self._statements(body)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node):
        self.scope.append(node.name)
        self._statements(node.body[1:] if _docstring(node) else node.body)
        self.scope.pop()

    def visit_Module(self, node):
        self._statements(node.body[1:] if _docstring(node) else node.body)

    def _statements(self, body):
        for i, statement in enumerate(body):
            self._sync_moves(body, i)
            self.visit(statement)

    def generic_visit(self, node):
        for name, value in ast.iter_fields(node):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                self._statements(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    def visit_Import(self, node):
        pass

    visit_ImportFrom = visit_JoinedStr = visit_Import  # imports and messages are not the kernel's logic

    def visit_Assign(self, node):
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self.visit(node.value)

    def visit_arguments(self, node):
        pass  # annotations; defaults are visited with the function

    # ---- operators
    def visit_Compare(self, node):
        operands = [node.left] + node.comparators
        for op, left, right in zip(node.ops, operands, operands[1:]):
            token = self.token_between(left, right, CMP_TOKEN)
            if token is None:
                continue
            start, end, text = token
            key = " ".join(text.split())
            self.add(COMPARE_FLIP, start, end, FLIPPED[key])
            if key in BOUNDARY:
                self.add(COMPARE_BOUNDARY, start, end, BOUNDARY[key])
            if self.target == CONTRACT_FILE and isinstance(op, ORDERING) and not _is_int(right):
                self._bounds(right)
        self.generic_visit(node)

    def _bounds(self, node):
        text = self.node_text(node)
        self.node_add(BOUND_PLUS_ONE, node, f"({text}) + 1")
        self.node_add(BOUND_MINUS_ONE, node, f"({text}) - 1")

    def visit_Constant(self, node):
        if _is_int(node):
            hexa = self.node_text(node).lower().startswith("0x")
            for operator, value in ((INT_PLUS_ONE, node.value + 1), (INT_MINUS_ONE, node.value - 1)):
                self.node_add(operator, node, (f"0x{value:X}" if hexa and value >= 0 else str(value)))
        elif isinstance(node.value, str) and self.target != CONTRACT_FILE:
            self._ptx(node)

    def _ptx(self, node):
        text = self.node_text(node)
        if MEMORY_CLOBBER in node.value:
            self.node_add(SYNC_REMOVED, node, text.replace(MEMORY_CLOBBER, ""))
        if not PTX_STRING.search(node.value):
            return
        for pattern, replacement in PTX_SIBLINGS:
            for match in re.finditer(pattern, text):
                self.node_add(PTX_SIBLING, node, text[:match.start()] + match.expand(replacement) + text[match.end():])

    def visit_BinOp(self, node):
        tokens = BIT_TOKENS.get(type(node.op))
        if tokens:
            found = self.token_between(node.left, node.right, re.compile(re.escape(tokens[0])))
            if found:
                self.add(BIT_SWAP, found[0], found[1], tokens[1])
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        tokens = BIT_TOKENS.get(type(node.op))
        if tokens:
            found = self.token_between(node.target, node.value, re.compile(re.escape(tokens[0] + "=")))
            if found:
                self.add(BIT_SWAP, found[0], found[1], tokens[1] + "=")
        self.generic_visit(node)

    def visit_BoolOp(self, node):
        other = " or " if isinstance(node.op, ast.And) else " and "
        self.node_add(BOOL_SWAP, node, other.join(f"({self.node_text(v)})" for v in node.values))
        self.generic_visit(node)

    def visit_IfExp(self, node):
        self.swap(SELECT_SWAP, node.body, node.orelse)
        self.generic_visit(node)

    def visit_Call(self, node):
        name = _called(node)
        if name in SELECTS and len(node.args) == 3:
            self.swap(SELECT_SWAP, node.args[1], node.args[2])
        if name in SHUFFLES and len(node.args) >= 2:
            self.node_add(SHUFFLE_LANE, node.args[1], f"({self.node_text(node.args[1])}) ^ 1")
        if name in LOOPS and node.args and not _is_int(node.args[min(1, len(node.args) - 1)]):
            self._bounds(node.args[min(1, len(node.args) - 1)])
        if self.target == CONTRACT_FILE and name == "_check_int" and len(node.args) == 4:
            for bound in node.args[2:]:
                if not _is_int(bound):
                    self._bounds(bound)
        self.generic_visit(node)

    def visit_Expr(self, node):
        name = _called(node.value) if isinstance(node.value, ast.Call) else None
        if name in SYNC_CALLS or (self.target == CONTRACT_FILE and name and name.startswith("_check_")):
            self.node_add(SYNC_REMOVED if name in SYNC_CALLS else CHECK_REMOVED, node, "pass")
        self.generic_visit(node)

    def visit_If(self, node):
        if self.target == CONTRACT_FILE and any(isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                                                and _called(s.value) == "_fail" for s in node.body):
            self.node_add(CHECK_REMOVED, node.test, "False")
        self.generic_visit(node)

    def _sync_moves(self, body, i):
        statement = body[i]
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) \
                and _called(statement.value) in SYNC_CALLS:
            if i + 1 < len(body):
                self.swap(SYNC_LATER, statement, body[i + 1])
            if i > 0:
                self.swap(SYNC_EARLIER, body[i - 1], statement)


def _start(node):
    return node.lineno, node.col_offset


def _end(node):
    return node.end_lineno, node.end_col_offset


def _docstring(node):
    return bool(node.body) and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) \
        and isinstance(node.body[0].value.value, str)


def _is_int(node):
    return isinstance(node, ast.Constant) and type(node.value) is int


def _called(call):
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


# ---------------------------------------------------------------------------------------------- the set

def blocks(tree):
    """(first line, last line, indentation) of every function (its decorators included) and every top-level
    statement of a parsed file: the smallest one holding an edit parses alone exactly when the file does."""
    top = {id(node) for node in tree.body}
    return [(min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())]), node.end_lineno,
             node.col_offset) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or id(node) in top]


def parses(mutated, text, start, end, spans, target="<mutant>"):
    """Whether ``mutated`` (``text`` with lines ``start``..``end`` edited) still parses, read in the smallest block
    of ``spans`` (blocks()) holding the edit, dedented: a block of some lines, not the whole file, per mutant."""
    first, last, indent = min((s for s in spans if s[0] <= start <= end <= s[1]), key=lambda s: s[1] - s[0])
    shift = mutated.count("\n") - text.count("\n")
    lines = mutated.splitlines(keepends=True)[first - 1:last + shift]
    chunk = "".join(line[indent:] if not line[:indent].strip() else line for line in lines)
    try:
        compile(chunk, target, "exec", ast.PyCF_ONLY_AST)
    except SyntaxError:
        return False
    return True


def mutants_of(target, text):
    """The mutants of one file's source ``text``, in source order, named; no-ops (an edit that leaves its segment's
    text, or swaps equal nodes) and repeats left out. Every other edit changes an operator, a constant, an
    instruction string or the order of nodes, so it changes the syntax tree."""
    sites = _Sites(text, target)
    tree = ast.parse(text)
    sites.visit(tree)
    spans = blocks(tree)
    ordinals, seen, out = {}, set(), []
    for function, operator, start, end, old, new in sorted(sites.found, key=lambda s: (s[2], s[3], s[1], s[5])):
        mutant = Mutant(target, function, operator, 0, start, end, old, new)
        mutated = mutant.apply(text)
        if not parses(mutated, text, start[0], end[0], spans, target):
            continue  # the operator's text does not parse here: no mutant
        if mutated in seen:
            continue
        seen.add(mutated)
        ordinal = ordinals.setdefault((function, operator), 0)
        ordinals[(function, operator)] += 1
        out.append(Mutant(target, function, operator, ordinal, start, end, old, new))
    return out


def generate(kernel_dir, targets=TARGETS):
    """Every mutant of the kernel package at ``kernel_dir``: by file (TARGETS' order), then source order."""
    return [m for target in targets for m in mutants_of(target, (Path(kernel_dir) / target).read_text())]


def sources_of(mutant, kernel_dir, texts=None):
    """{file name: text} of the kernel package with ``mutant`` (None: unedited) applied (``texts``: the package's
    files as read before)."""
    texts = dict(texts or {path.name: path.read_text() for path in sorted(Path(kernel_dir).glob("*.py"))})
    if mutant is not None:
        texts[mutant.target] = mutant.apply(texts[mutant.target])
    return texts


def diff(mutant, kernel_dir):
    """The unified diff of the mutant's edit."""
    import difflib

    before = (Path(kernel_dir) / mutant.target).read_text()
    after = mutant.apply(before)
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        f"a/kernel/{mutant.target}", f"b/kernel/{mutant.target}", n=1))
