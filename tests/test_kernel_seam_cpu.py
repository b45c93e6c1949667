"""The kernel's seam: what the harness may use of kernel/ is its public names. No file outside kernel/ imports or
reads a kernel module's name that begins with "_" (read from every file's syntax tree, never by running it);
kernel/contract.py holds the argument checks and the checked-call cache alone, the device facts it checks are
layout's,
and routing's public list is routing's own names (none re-exported from layout)."""

import ast
import subprocess
from pathlib import Path

import pytest

from kernel import contract, layout, routing

ROOT = Path(__file__).resolve().parents[1]
KERNEL_MODULES = {p.stem for p in (ROOT / "kernel").glob("*.py")} - {"__init__"}


def _private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(source, filename="<source>"):
    """Each use of a kernel module's private name in ``source``, as "line: what"."""
    tree = ast.parse(source, filename)
    aliases, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "kernel":
            aliases |= {a.asname or a.name for a in node.names if a.name in KERNEL_MODULES}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kernel."):
            found += [f"{node.lineno}: from {node.module} import {a.name}" for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Import):
            aliases |= {a.asname for a in node.names if a.name.startswith("kernel.") and a.asname}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            if isinstance(base, ast.Name) and base.id in aliases:
                found.append(f"{node.lineno}: {base.id}.{node.attr}")
            elif isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id == "kernel":
                found.append(f"{node.lineno}: kernel.{base.attr}.{node.attr}")
    return found


def _files_outside_kernel():
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / name for name in listed if not name.startswith("kernel/") and (ROOT / name).is_file()]


def test_nothing_outside_the_kernel_uses_a_private_name_of_it():
    offences = {str(p.relative_to(ROOT)): uses for p in _files_outside_kernel()
                if (uses := private_uses(p.read_text(), str(p)))}
    assert not offences, offences


@pytest.mark.parametrize("source, offence", [
    ("from kernel import routing\nrouting._launch(1)", "routing._launch"),
    ("from kernel import routing as r\nr._checked.get(1)", "r._checked"),
    ("from kernel.routing import _select", "from kernel.routing import _select"),
    ("import kernel.contract\nkernel.contract._fail('x', 'y')", "kernel.contract._fail"),
])
def test_each_way_of_reaching_a_private_name_is_seen(source, offence):
    assert any(offence in use for use in private_uses(source))
    assert not private_uses("from kernel import routing\nrouting.route(1)\nrouting.__file__")


def test_the_contract_module_holds_the_checks_and_the_cache_alone():
    public = {name for name in vars(contract) if not name.startswith("_")} - set(vars(contract)["__builtins__"])
    own = {name for name in public if getattr(getattr(contract, name), "__module__", None) == contract.__name__}
    assert own == {"check_arguments", "check_abstract", "signature", "CheckedCalls"}, own
    for fact in ("VECTOR_WORDS", "TENSOR_ALIGN"):
        assert hasattr(layout, fact) and (not hasattr(contract, fact) or getattr(contract, fact) is getattr(layout, fact))


def test_routing_lists_its_own_names_and_no_layout_fact():
    assert not set(routing.__all__) & {n for n in vars(layout) if not n.startswith("_")}
    assert all(hasattr(routing, name) for name in routing.__all__)


def test_compile_artifacts_writes_where_its_caller_says(tmp_path):
    ptx, _ = routing.compile_artifacts(False, True, 0, tmp_path)
    dumped = {p.suffix: p for p in tmp_path.iterdir()}
    assert set(dumped) == {".ptx", ".cubin"} and dumped[".ptx"].read_text() == ptx
    with pytest.raises(ValueError, match="spaces"):
        routing.compile_artifacts(False, True, 0, tmp_path / "a folder")
