"""Kernel mutants generated from the kernel's own code: mutation operators applied at every site of the syntax
tree of kernel/routing.py, network.py, primitives.py, contract.py and op.py, never pinned to their text.

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

TARGETS = ("routing.py", "network.py", "primitives.py", "contract.py", "op.py")
# The kernel's files no mutant edits, each with the reason.
UNTARGETED = {"layout.py": "the routing problem's shapes and metadata layout, which the oracles import too (from the "
                           "mutant's copy): an edit of it changes the kernel and the model alike",
              "__init__.py": "empty"}
CONTRACT_FILE = "contract.py"
MODULE = "module"  # the "function" of a site outside any function

COMPARE_FLIP, COMPARE_BOUNDARY = "compare_flip", "compare_boundary"
INT_PLUS_ONE, INT_MINUS_ONE = "int_plus_one", "int_minus_one"
BOUND_PLUS_ONE, BOUND_MINUS_ONE = "bound_plus_one", "bound_minus_one"
BIT_SWAP, BOOL_SWAP, SELECT_SWAP = "bit_swap", "bool_swap", "select_swap"
SYNC_REMOVED, SYNC_LATER, SYNC_EARLIER = "sync_removed", "sync_later", "sync_earlier"
PTX_SIBLING, SHUFFLE_LANE = "ptx_sibling", "shuffle_lane"
CHECK_REMOVED = "check_removed"
CALL_SIBLING, ARGUMENT_SWAP, CONSTANT_NEIGHBOUR = "call_sibling", "argument_swap", "constant_neighbour"
STATEMENT_DROPPED, STATEMENTS_EXCHANGED = "statement_dropped", "statements_exchanged"
ELEMENT_DROPPED = "element_dropped"
HAND = "hand"
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
    CALL_SIBLING: "a call replaced by a sibling of the same signature (add_f32 and sub_f32, min and max, ...)",
    ARGUMENT_SWAP: "the first two differing positional arguments (or operands) of a call of the kernel's own "
                   "function swapped",
    CONSTANT_NEIGHBOUR: "a named constant replaced by the next one of its module of the same type and another value",
    STATEMENT_DROPPED: "a function's last statement with an effect (a store, a call, else a rebinding) dropped",
    STATEMENTS_EXCHANGED: "two adjacent statements exchanged where one reads a name the other rebinds",
    ELEMENT_DROPPED: "an element of the contract's checked-call signature (a tuple of SIGNATURE_ELEMENTS or more) "
                     "dropped",
    HAND: "a hand-written edit no operator makes (properties/mutants/catalog.py, with the reason)",
}

SYNC_CALLS = ("sync_threads", "sync_warp", "griddepcontrol_wait", "griddepcontrol_launch_dependents", "barrier",
              "fence_acq_rel_cta", "fence_proxy", "fence_view_async_shared", "mbarrier_wait")
MEMORY_CLOBBER = ",~{memory}"
# Calls STATEMENT_DROPPED leaves: a contract's failure (CHECK_REMOVED makes its check False), the host waiting.
NOT_DROPPED = ("_fail", "synchronize")
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
# The sibling of each callee (its dotted name as written) that takes the same arguments: one mutant per call.
CALL_SIBLINGS = {
    "add_f32": "sub_f32", "sub_f32": "add_f32", "mul_f32": "div_full_f32", "div_full_f32": "mul_f32",
    "cutlass.min": "cutlass.max", "cutlass.max": "cutlass.min",
    "cute.arch.lanemask_lt": "cute.arch.lanemask_le",
    "_check_contiguous": "_check_aligned", "_check_aligned": "_check_contiguous",
    "np.isfinite": "np.isnan",
}
CONTRACT_CALL_SIBLINGS = {"np.float32": "np.float64"}  # the scale's finiteness read in another width
SIGNATURE_ELEMENTS = 6
# Calls (and functions, whose own calls) whose arguments commute, so a swap changes no value, or whose swap
# another operator makes (select_swap).
NO_ARGUMENT_SWAP = ("add_f32", "mul_f32", "compare_exchange_u64", "_select")
DSL_PLUMBING = ("loc", "ip")  # a DSL operation's source location and insertion point
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
    reason: str = ""  # a hand-written mutant's: why no operator makes it

    kills = frozenset()  # no tier is declared: whichever tier can must kill it (runner.run_probe reads this)

    @property
    def name(self):  # a hand-written mutant's ordinal is its catalog name
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

    def __init__(self, text, target, package=None):
        self.text, self.lines, self.target = text, text.splitlines(keepends=True), target
        self.scope, self.found, self.skip = [], [], set()
        tree = ast.parse(text)
        self.neighbours = _neighbours(tree, target, package or {target: text})
        self.callables = _callables(tree, package or {target: text})

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
        self._drop_one(body)
        self._exchange_one(node, body)
        self.scope.pop()

    def _drop_one(self, body):
        """STATEMENT_DROPPED at the function's last statement with an effect: a store or a call that no other
        operator removes, else a rebinding of a name, else a raise or a return of a value; one inside a ``with``
        (another device's context: one GPU never enters it) only where nothing outside one has an effect."""
        ranked = [(_effect_rank(s, self.target), i, s) for i, (s, _) in enumerate(_own_statements(body))]
        ranked = [(rank - (2 if guarded else 0), i, s) for (rank, i, s), (_, guarded)
                  in zip(ranked, _own_statements(body)) if rank is not None]
        if ranked:
            self.node_add(STATEMENT_DROPPED, max(ranked, key=lambda r: (r[0], r[1]))[2], "pass")

    def _exchange_one(self, function, body):
        """STATEMENTS_EXCHANGED at the function's first adjacent pair (in source order) where one statement reads
        a name the other binds, that name bound before both on every path: the exchange reads the other value,
        never an unbound name."""
        pairs = sorted(_stale_pairs(body, {a.arg for a in function.args.args + function.args.kwonlyargs}),
                       key=lambda pair: _start(pair[0]))
        if pairs:
            self.swap(STATEMENTS_EXCHANGED, *pairs[0])

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

    def visit_Tuple(self, node):
        if self.target == CONTRACT_FILE and len(node.elts) >= SIGNATURE_ELEMENTS:
            for i, element in enumerate(node.elts):
                following = node.elts[i + 1] if i + 1 < len(node.elts) else None
                end = _start(following) if following else _end(element)
                start = _start(element) if following else _end(node.elts[i - 1])
                self.add(ELEMENT_DROPPED, start, end, "")
        self.generic_visit(node)

    def visit_Name(self, node):
        neighbour = self.neighbours.get(node.id)
        if neighbour and isinstance(node.ctx, ast.Load) and self.scope:
            self.node_add(CONSTANT_NEIGHBOUR, node, neighbour)

    def _argument_swap(self, call):
        """ARGUMENT_SWAP at the first two differing positional arguments (no string, no DSL location), else at
        the first two differing elements of an operand tuple passed positionally."""
        if any(isinstance(a, ast.Starred) for a in call.args):
            return
        args = [a for a in call.args if not _is_text(a) and not (isinstance(a, ast.Name) and a.id in DSL_PLUMBING)]
        tuples = [a.elts for a in args if isinstance(a, ast.Tuple)]
        for group in [args] + tuples:
            pairs = [(a, b) for a, b in zip(group, group[1:]) if ast.dump(a) != ast.dump(b)]
            if pairs:
                self.swap(ARGUMENT_SWAP, *pairs[0])
                return

    def visit_Call(self, node):
        name = _called(node)
        dotted = _dotted(node.func)
        siblings = {**CALL_SIBLINGS, **(CONTRACT_CALL_SIBLINGS if self.target == CONTRACT_FILE else {})}
        if dotted in siblings:
            self.node_add(CALL_SIBLING, node.func, siblings[dotted])
        if (dotted in self.callables or (dotted or "").startswith("self.") and dotted[5:] in self.callables) \
                and not {dotted, self.scope[-1] if self.scope else None} & set(NO_ARGUMENT_SWAP):
            self._argument_swap(node)
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


def _dotted(node):
    """``a.b.c`` of a name or a chain of attributes; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return base and f"{base}.{node.attr}"
    return None


def _value(node, known):
    """The value of a module constant's expression: an int, ("Imm", bits) for an Imm, None if neither."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if isinstance(node, ast.Call) and _dotted(node.func) == "Imm" and len(node.args) == 1:
        bits = _value(node.args[0], known)
        return ("Imm", bits) if isinstance(bits, int) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _value(node.operand, known)
        return -inner if isinstance(inner, int) else None
    if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPS:
        left, right = _value(node.left, known), _value(node.right, known)
        if isinstance(left, int) and isinstance(right, int):
            return _INT_OPS[type(node.op)](left, right)
    return None


_INT_OPS = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__, ast.FloorDiv: int.__floordiv__,
            ast.Mod: int.__mod__, ast.LShift: int.__lshift__, ast.RShift: int.__rshift__, ast.BitOr: int.__or__,
            ast.BitAnd: int.__and__}


def _constants(tree, known=None):
    """[(name, value)] of a module's named int and Imm constants (upper-case names), in definition order."""
    known, out = dict(known or {}), []
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id.isupper():
            value = _value(node.value, known)
            if value is not None:
                known[node.targets[0].id] = value
                out.append((node.targets[0].id, value))
    return out


def _imports(tree):
    """{name: kernel module file} of the names a module imports from the kernel package."""
    return {alias.asname or alias.name: node.module.split(".")[-1] + ".py" for node in tree.body
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kernel.") for alias in node.names}


def _neighbours(tree, target, package):
    """{constant name: its neighbour} for the constants a file uses: the next constant of the module that defines
    it, of the same type (int, or Imm) with another value, that the file sees (its own or imported); the
    previous such one for the module's last."""
    imported = _imports(tree)
    visible = set(imported) | {name for name, _ in _constants(tree, _imported_values(imported, package))}
    out = {}
    for module in {target} | set(imported.values()):
        if module not in package:
            continue
        parsed = tree if module == target else ast.parse(package[module])
        listed = _constants(parsed, _imported_values(_imports(parsed), package))
        for i, (name, value) in enumerate(listed):
            if name not in visible or (module != target and imported.get(name) != module):
                continue
            for other, other_value in listed[i + 1:] + listed[:i][::-1]:
                if other in visible and type(other_value) is type(value) and other_value != value and \
                        (module == target or imported.get(other) == module):
                    out[name] = other
                    break
    return out


def _imported_values(imported, package):
    values = {}
    for module in set(imported.values()) & set(package):
        values.update(_constants(ast.parse(package[module])))
    return values


def _callables(tree, package):
    """The names of the kernel's own functions, classes and methods a file can call (its own and imported)."""
    names = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for name, module in _imports(tree).items():
        if module in package and any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name
                                     for n in ast.parse(package[module]).body):
            names.add(name)
    return names


def _own_statements(body, guarded=False):
    """(statement, whether a ``with`` holds it) of every statement of a function's body, nested blocks included,
    nested functions and classes not."""
    for statement in body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        yield statement, guarded
        inner = guarded or isinstance(statement, (ast.With, ast.AsyncWith))
        for field in ("body", "orelse", "finalbody", "handlers"):
            for child in getattr(statement, field, ()):
                yield from _own_statements(child.body if isinstance(child, ast.ExceptHandler) else [child], inner)


def _effect_rank(statement, target):
    """How well dropping ``statement`` tests its function (higher first), None for one not to drop: a sync call,
    a contract check or its failure (removed by their own operators), a host's wait for the device."""
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        name = _called(statement.value)
        if name in SYNC_CALLS + NOT_DROPPED or (target == CONTRACT_FILE and name and name.startswith("_check_")):
            return None
        return 3
    targets = statement.targets if isinstance(statement, ast.Assign) else \
        [statement.target] if isinstance(statement, (ast.AugAssign, ast.AnnAssign)) else []
    if any(isinstance(t, (ast.Subscript, ast.Attribute)) for t in targets):
        return 3
    if isinstance(statement, ast.AugAssign):
        return 2
    if isinstance(statement, (ast.Raise, ast.Return)) and (getattr(statement, "exc", None) or
                                                           getattr(statement, "value", None)):
        return 1
    return None


def _names(node, ctx):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def _stale_pairs(block, bound):
    """Every adjacent pair of ``block`` and its nested blocks that _stale calls stale, given the names ``bound``
    on entry to the block (a loop's target bound in its body)."""
    for i, statement in enumerate(block):
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if i + 1 < len(block) and _stale(statement, block[i + 1], bound):
            yield statement, block[i + 1]
        inner = bound | (_names(statement.target, ast.Store) if isinstance(statement, (ast.For, ast.AsyncFor))
                         else set())
        for field in ("body", "orelse", "finalbody"):
            if getattr(statement, field, None):
                yield from _stale_pairs(getattr(statement, field), inner)
        for handler in getattr(statement, "handlers", ()):
            yield from _stale_pairs(handler.body, inner)
        if not isinstance(statement, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With)):
            bound = bound | _names(statement, ast.Store)


def _stale(first, second, bound):
    """Whether exchanging ``first`` and ``second`` makes one read the other value of a name bound before both."""
    if isinstance(first, (ast.Return, ast.Raise)) or isinstance(second, (ast.Return, ast.Raise)):
        return False
    written_first, written_second = _names(first, ast.Store), _names(second, ast.Store)
    return bool((written_first & _names(second, ast.Load) & bound) or (written_second & _names(first, ast.Load) & bound))


def _start(node):
    return node.lineno, node.col_offset


def _end(node):
    return node.end_lineno, node.end_col_offset


def _docstring(node):
    return bool(node.body) and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) \
        and isinstance(node.body[0].value.value, str)


def _is_text(node):
    """A string or an f-string: swapped with another argument it only breaks a call's types or its message."""
    return isinstance(node, ast.JoinedStr) or isinstance(node, ast.Constant) and isinstance(node.value, str)


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


def _thinned(found):
    """The candidates with one CONSTANT_NEIGHBOUR per constant of the file (its first use in the first function,
    by qualified name, that uses it) and one ARGUMENT_SWAP per function (its first call): a choice that moving
    code leaves alone."""
    first = {}
    for site in sorted(found, key=lambda s: (s[0], s[2])):
        function, operator, old = site[0], site[1], site[4]
        key = (operator, old) if operator == CONSTANT_NEIGHBOUR else (operator, function) \
            if operator == ARGUMENT_SWAP else None
        if key is None or key not in first:
            first.setdefault(key, site)
            yield site


def mutants_of(target, text, package=None):
    """The mutants of one file's source ``text``, in source order, named; no-ops (an edit that leaves its segment's
    text, or swaps equal nodes) and repeats left out. Every other edit changes an operator, a constant, an
    instruction string or the order of nodes, so it changes the syntax tree."""
    sites = _Sites(text, target, package)
    tree = ast.parse(text)
    sites.visit(tree)
    spans = blocks(tree)
    ordinals, seen, out = {}, set(), []
    for function, operator, start, end, old, new in sorted(_thinned(sites.found), key=lambda s: (s[2], s[3], s[1], s[5])):
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


def hand_mutant(mutant, text):
    """A hand-written catalog mutant (properties/mutants/catalog.py; its edits in one file, each text found once)
    as one segment of ``text``: from its first edit's start to its last edit's end, every edit applied inside."""
    from properties.mutants.catalog import replace_once

    (target,) = {e.target for e in mutant.edits}
    spans = []
    for edit in mutant.edits:
        replace_once(text, edit.old, edit.new, f"mutant {mutant.name}: its edit of kernel/{target}")
        spans.append((text.index(edit.old), text.index(edit.old) + len(edit.old)))
    begin, finish = min(s for s, _ in spans), max(e for _, e in spans)
    old = text[begin:finish]
    new = old
    for edit in mutant.edits:
        new = replace_once(new, edit.old, edit.new, mutant.name)
    lines = text.splitlines(keepends=True)
    start, end = _position(lines, begin), _position(lines, finish)
    return Mutant(target, _enclosing(ast.parse(text), start[0]), HAND, mutant.name, start, end, old, new,
                  mutant.reason)


def _position(lines, offset):
    """The ast (line, UTF-8 byte column) position of a character offset in the text of ``lines``."""
    line = 0
    while offset >= len(lines[line]) and line + 1 < len(lines):
        offset -= len(lines[line])
        line += 1
    return line + 1, len(lines[line][:offset].encode())


def _enclosing(tree, line):
    """The qualified name of the innermost function or class holding ``line`` (MODULE outside any)."""
    def walk(node, scope):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                    and child.lineno <= line <= child.end_lineno:
                return walk(child, scope + [child.name])
        return scope
    return ".".join(walk(tree, [])) or MODULE


def generate(kernel_dir, targets=TARGETS, hand=True):
    """Every mutant of the kernel package at ``kernel_dir``: by file (TARGETS' order), then source order; then
    (``hand``) the hand-written ones (properties/mutants/catalog.py's CATALOG) in the catalog's order, each
    pinned to its text (MutantEditError where a refactor changed it)."""
    from properties.mutants.catalog import CATALOG

    package = {path.name: path.read_text() for path in sorted(Path(kernel_dir).glob("*.py"))}
    return [m for target in targets for m in mutants_of(target, package[target], package)] + \
        [hand_mutant(m, package[m.edits[0].target]) for m in (CATALOG if hand else ())]


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
