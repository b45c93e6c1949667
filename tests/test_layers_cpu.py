"""The import layering, read from every Python file's imports (ast), never by running it: common (the bottom
floor: argument parsing, provenance, the FP environment) imports no other layer; kernel nothing from common,
oracles, properties or tests; oracles nothing from properties or tests, and of the kernel only
its layout (kernel/layout.py, the shared shapes), so they stay independent of the kernel; properties nothing
from tests. A layer may import the layers below it and the standard library or third-party packages. Inside
properties/, the floors of its rooms (PROPERTIES_FLOORS): every module stands in a room, and a room imports
only itself and the rooms of lower floors."""

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Each layer and the project layers it must not import (the ones above it).
FORBIDDEN = {
    "common": {"kernel", "oracles", "properties", "tests"},
    "kernel": {"common", "oracles", "properties", "tests"},
    "oracles": {"properties", "tests"},
    "properties": {"tests"},
}


def _python_files():
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / name for name in listed if (ROOT / name).is_file()]


# The rooms of properties/, lowest floor first (properties/__init__.py names them). A room imports itself and
# the rooms of lower floors, never one of its own floor or above. A module's room is the longest name here that
# it is or lies under (properties.tools.gate stands in properties.tools); "properties" is the package's own
# __init__.py alone. Every module of properties/ must stand in a room: a new package or loose module is placed
# here first.
PROPERTIES_FLOORS = (
    ("properties",),
    ("properties.engine",),  # cases, implementations, comparison, case files, float32 bits, invariants
    # what the harness draws; the kernel's static checks; route's contract stated on its own
    ("properties.inputs", "properties.codegen", "properties.contract"),
    ("properties.bench", "properties.mutants", "properties.soak"),
    ("properties.tools",),  # the gate, the smoke run, the offline bundle
    ("properties.report",),  # reads what the gate, the bench, the mutants and the soak wrote
    ("properties.corpus", "properties.replay", "properties.view"),  # the commands a user runs on case files
)
FLOOR = {room: floor for floor, rooms in enumerate(PROPERTIES_FLOORS) for room in rooms}


def room_of(name):
    """The room of PROPERTIES_FLOORS that module (or imported name) ``name`` stands in, or None."""
    name = name.removesuffix(".__init__")
    if name == "properties":
        return name
    rooms = [room for room in FLOOR if room != "properties" and (name == room or name.startswith(room + "."))]
    return max(rooms, key=len, default=None)


def floor_offences(source, module):
    """Each import of ``source`` (the file of ``module``, in properties/) into a room on its own floor or
    above, as "module imports name"."""
    here = room_of(module)
    return [f"{module} imports {name}" for name in sorted(imported_modules(source, module))
            if (there := room_of(name)) not in (None, here) and FLOOR[there] >= FLOOR[here]]


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


def test_the_floor_reader_places_names_and_finds_an_import_upwards():
    assert room_of("properties.engine.cases.RoutingCase") == "properties.engine"
    assert room_of("properties.tools.gate") == "properties.tools"
    assert room_of("properties") == "properties" and room_of("properties.loose") is None
    assert room_of("properties.engineering") is None
    assert floor_offences("from properties.report import screenshot\n", "properties.tools.gate") == [
        "properties.tools.gate imports properties.report.screenshot"]
    assert floor_offences("from properties.soak import plan\n", "properties.bench.cli") == [
        "properties.bench.cli imports properties.soak.plan"]
    assert floor_offences("from common.args import OneLineParser\nimport properties\n"
                          "from properties.engine import cases\n", "properties.inputs.x") == []


def _properties_modules():
    for path in _python_files():
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[0] == "properties":
            yield path, ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_module_of_properties_stands_in_a_room():
    homeless = sorted(module for _, module in _properties_modules() if room_of(module) is None)
    assert not homeless, f"not in any room of PROPERTIES_FLOORS: {homeless}"


def test_no_room_of_properties_imports_its_own_floor_or_above():
    offences = [offence for path, module in _properties_modules()
                for offence in floor_offences(path.read_text(), module + (".__init__" if path.name == "__init__.py"
                                                                          else ""))]
    assert not offences, "\n".join(offences)


def _readme_rooms():
    """The rooms the README's Folders table names for properties/: each `name/` or `name.py` of its row."""
    (row,) = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| `properties/` |")]
    return set(re.findall(r"`([a-z_]+/|[a-z_]+\.py)`", row.split(" | ")[1]))


def test_the_readmes_folders_table_names_every_room_of_properties_and_only_those():
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "properties"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    tree = {name.split("/")[1] + ("/" if name.count("/") > 1 else "") for name in listed} - {"__init__.py"}
    assert _readme_rooms() == tree
