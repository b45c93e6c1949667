"""No circle of imports among the repository's modules, read from every Python file's imports (ast, as
tests/test_layers_cpu.py reads them), imports inside functions included: a registry knows its entries, and
an entry does not import the registry back. An import of ``a.b.c`` is an edge to the module ``a.b.c`` (or to
``a.b`` when ``c`` is a name inside it), not to the packages above it, which Python imports first but which
do not make a module depend on its siblings."""

import ast

from test_layers_cpu import ROOT, _python_files, imported_modules


def modules():
    """module name -> its file, for every tracked or new Python file of the repository."""
    found = {}
    for path in _python_files():
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports_of(source, module, known, package):
    """The repository modules ``source`` (the file of ``module``) imports."""
    targets = set()
    for name in imported_modules(source, module if not package else module + ".__init__"):
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            targets.add(name)
    return targets


def graph():
    known = modules()
    return {module: imports_of(path.read_text(), module, known, path.name == "__init__.py")
            for module, path in known.items()}


def cycles(edges):
    """Every strongly connected component of more than one module (or a module importing itself), sorted."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in edges.get(node, ()):
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_cycle_finder_finds_a_circle_and_only_circles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set(), "c": {"b"}}) == []
    known = {"p", "p.x", "p.y"}
    assert imports_of("from p.y import f\nimport p\n", "p.x", known, False) == {"p.y", "p"}
    assert imports_of("def g():\n    from . import x\n", "p", known, True) == {"p.x"}


def test_no_module_imports_itself_through_others():
    found = cycles(graph())
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c + [c[0]]) for c in found)


def test_the_graph_reads_every_module():
    edges = graph()
    assert "properties.engine.implementations" in edges and "kernel.routing" in edges
    assert "properties.engine.builtins" in edges["properties.engine.implementations"]
    assert all(isinstance(ast.parse(path.read_text()), ast.Module) for path in modules().values())
