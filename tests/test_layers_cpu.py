"""The import layering, read from every Python file's imports (ast), never by running it: kernel imports
nothing from oracles, properties or tests; oracles nothing from properties or tests, and of the kernel only
its layout (kernel/layout.py, the shared shapes), so they stay independent of the kernel; properties nothing
from tests. A layer may import the layers below it and the standard library or third-party packages."""

import ast
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Each layer and the project layers it must not import (the ones above it).
FORBIDDEN = {
    "kernel": {"oracles", "properties", "tests"},
    "oracles": {"properties", "tests"},
    "properties": {"tests"},
}


def _python_files():
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / name for name in listed if (ROOT / name).is_file()]


# The one module of the kernel an oracle may import.
ORACLES_MAY_IMPORT = "kernel.layout"


def _oracles_may_import(name):
    """``name`` is kernel.layout itself (``import kernel.layout``, ``from kernel import layout``) or in it."""
    return name == ORACLES_MAY_IMPORT or name.startswith(ORACLES_MAY_IMPORT + ".")


def imported_modules(source, module):
    """Every name ``source`` imports, dotted in full (``from a.b import c`` gives "a.b.c"); a relative import
    is resolved against ``module``."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(module.split(".")[:-node.level] + ([node.module] if node.module else [])) \
                if node.level else node.module
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


def imported_packages(source, module):
    """The top-level package of every import in ``source``."""
    return {name.split(".")[0] for name in imported_modules(source, module)}


def test_the_reader_finds_imports_anywhere_in_a_file():
    source = "import os\ndef f():\n    from properties.engine import cases\n    import tests.conftest as c\n"
    assert imported_packages(source, "kernel.routing") == {"os", "properties", "tests"}
    assert imported_packages("from . import layout\n", "kernel.routing") == {"kernel"}
    assert imported_modules("from kernel.layout import TOP_K\n", "oracles.x") == {"kernel.layout.TOP_K"}
    allowed = ("from kernel.layout import TOP_K\n", "import kernel.layout\n", "from kernel import layout\n")
    assert all(_oracles_may_import(name) for source in allowed for name in imported_modules(source, "oracles.x"))
    refused = ("import kernel\n", "from kernel import routing\n", "import kernel.layout_v2\n", "from . import y\n")
    assert not any(_oracles_may_import(name) for source in refused for name in imported_modules(source, "kernel.x"))


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_no_layer_imports_a_layer_above_it(layer):
    files = [path for path in _python_files() if path.relative_to(ROOT).parts[0] == layer]
    assert files, f"no Python files under {layer}/"
    offences = []
    for path in files:
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        above = imported_packages(path.read_text(), module) & FORBIDDEN[layer]
        offences += [f"{path.relative_to(ROOT)} imports {name}" for name in sorted(above)]
    assert not offences, "\n".join(offences)


def test_oracles_import_nothing_of_the_kernel_but_its_layout():
    offences = []
    for path in _python_files():
        if path.relative_to(ROOT).parts[0] != "oracles":
            continue
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        offences += [f"{path.relative_to(ROOT)} imports {name}"
                     for name in sorted(imported_modules(path.read_text(), module))
                     if name.split(".")[0] == "kernel" and not _oracles_may_import(name)]
    assert not offences, "\n".join(offences)
