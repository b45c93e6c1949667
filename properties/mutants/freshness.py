"""Whether the kernel's evidence record was made for the tree that is here now.

The evidence record (EVIDENCE, made and refreshed by REFRESH: properties/mutants/generated.py, the rule of what
a refresh reruns in properties/mutants/refresh.py) holds every generated mutant's verdict. Its verdicts depend on
the kernel it mutates, the code its run and probes execute and the data they read. INPUTS are those files: the
repository modules of ENTRY_MODULES, followed through every import of the repository's own packages (read from
the syntax tree, never by running it), every file of the kernel, and the data folders the probes read. A record
holds the sha256 of each (``inputs()``); ``stale_inputs`` names each file added, removed or changed since. It is
fresh when its verdict is PASS, it is complete (every mutant, every tier, no time budget hit) and its inputs are
this tree's (``status``). The gate reports a stale record by name; on a GPU runner (VERIFY_REQUIRE_GPU=1) or with
VERIFY_REQUIRE_FRESH=1 it fails.
"""

import ast
import hashlib
from pathlib import Path

from common.provenance import REPO_ROOT

EVIDENCE = REPO_ROOT / "properties" / "results" / "evidence.json"  # the committed record the gate reads
RECORD_KIND = "mutants-generated"  # an evidence record's kind
REFRESH = "make evidence"  # on a GPU: refreshes EVIDENCE from itself (Makefile)
ENTRY_MODULES = ("properties.mutants.generated", "properties.mutants.prefilter", "properties.mutants.probe")
REPO_PACKAGES = ("common", "kernel", "oracles", "properties")  # the repository's importable packages
DATA = ("kernel", "oracles/mufu/data", "corpora/mutants", "properties/engine/case.schema.json")  # read, not imported


def cases_dir(record):
    """Where the record ``record`` keeps its killing case files: the folder beside it named <stem>-cases."""
    return Path(record).with_name(Path(record).stem + "-cases")


def module_file(name, root=REPO_ROOT):
    """The source file of repository module ``name`` (a module or a package's __init__), or None."""
    path = root.joinpath(*name.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported(path, name, root):
    """The repository modules ``path`` (module ``name``) imports, at any depth of its code."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(filter(None, [*parent, base]))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # a submodule, when it is one
    return {n for n in found if n.split(".")[0] in REPO_PACKAGES and module_file(n, root)}


def import_closure(modules=ENTRY_MODULES, root=REPO_ROOT):
    """The files of ``modules`` and of every repository module they import, with their packages' __init__."""
    todo, seen = list(modules), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # importing a.b.c runs a and a.b
        todo += sorted(_imported(module_file(name, root), name, root))
    return {module_file(name, root) for name in seen}


def inputs(root=REPO_ROOT):
    """{path relative to ``root``: sha256} of every file an evidence record's verdicts depend on."""
    files = import_closure(root=root)
    for name in DATA:
        path = root / name
        files.update(p for p in ([path] if path.is_file() else path.rglob("*"))
                     if p.is_file() and "__pycache__" not in p.parts)
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(files)}


def stale_inputs(recorded, now):
    """The files in which ``recorded`` and ``now`` ({path: sha256}) differ, each as "path changed", "path added"
    or "path removed"."""
    return [f"{path} {'added' if path not in recorded else 'removed' if path not in now else 'changed'}"
            for path in sorted(set(recorded) | set(now)) if recorded.get(path) != now.get(path)]


def status(record, now):
    """(fresh, one line) for evidence record ``record`` (a dict, or None when there is none) against the inputs
    ``now``: fresh when it passed, covered every mutant and tier and was made for exactly these inputs."""
    if record is None:
        return False, "no evidence record"
    provenance = record.get("provenance") or {}
    made = f"made on {provenance.get('gpu') or 'a machine without a GPU'} at {provenance.get('commit', 'an unknown commit')}"
    if record.get("kind") != RECORD_KIND:
        return False, f"its kind is {record.get('kind')!r}, not {RECORD_KIND!r} ({made})"
    if record.get("verdict") != "PASS":
        return False, f"its verdict is {record.get('verdict')!r}, not PASS ({made})"
    if record.get("tier") != "gpu":
        return False, f"it ran the {record.get('tier')!r} tiers alone, not every tier ({made})"
    if not record.get("complete"):
        return False, f"it is not complete (a selection, a time budget hit or a mutant not run) ({made})"
    if "inputs" not in record:
        return False, f"it records no inputs, so nothing says what it was made for ({made})"
    changed = stale_inputs(record["inputs"], now)
    if changed:
        shown = ", ".join(changed[:6]) + (f" and {len(changed) - 6} more" if len(changed) > 6 else "")
        return False, f"STALE: {len(changed)} of its inputs differ from this tree's: {shown} ({made})"
    total = record["score"]["total"]
    return True, (f"fresh: {total['score']} non-equivalent mutants detected, {total['equivalent']} equivalent, {made}, "
                  f"refreshed in {record['refresh']['seconds']} s")
