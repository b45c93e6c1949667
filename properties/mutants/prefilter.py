"""The CPU prefilter of the generated mutants, one worker process over many kernel copies in turn.

    python -m properties.mutants.prefilter PLAN RESULT

PLAN (JSON): {"coverage": kernel dir or null, "mutants": [{"name", "dir", "variants": [[metadata, renormalize,
tokens], ...]}]}. Each kernel copy is imported afresh (the ``kernel`` package and the codegen checks dropped
from sys.modules first, the copy's folder first on sys.path) and run through the static tier
(properties/mutants/probe.py's ``static``, first kill) over its listed variants alone: the PTX digest of each,
the launch digest, and whether a codegen check kills it. With "coverage", the real kernel is first traced:
the lines of each kernel file run at import, inside the traced device code (a frame of a ``cute.kernel``
function on the stack) of each variant, by the rest of its compile (host code), and by the
launch digest. One JSON line per kernel goes to RESULT as it finishes; a copy that raises (one that does not
compile) gives its error.
"""

import ast
import json
import sys
import tempfile
import time
import traceback
from collections import defaultdict
from pathlib import Path

PURGED = ("kernel", "properties.codegen")
# Device code is what runs inside a cute.kernel's trace; a cute.jit launcher's own lines set the grid and block,
# which neither the PTX nor the launch digest holds, so they count as host code.
DEVICE_DECORATORS = ("kernel",)


def _purge():
    for name in [n for n in sys.modules if any(n == p or n.startswith(p + ".") for p in PURGED)]:
        del sys.modules[name]


def _import_copy(kernel_dir):
    """Import the kernel package at ``kernel_dir`` (never the repository's)."""
    _purge()
    folder = str(Path(kernel_dir).resolve().parent)
    sys.path.insert(0, folder)
    try:
        import kernel.routing
    finally:
        sys.path.remove(folder)
    if Path(kernel.routing.__file__).resolve().parent != Path(kernel_dir).resolve():
        raise RuntimeError(f"imported kernel.routing from {kernel.routing.__file__}, expected {kernel_dir}")
    return kernel.routing


def device_functions(kernel_dir):
    """{file name: names of its functions decorated cute.kernel}: the device code's roots."""
    names = {}
    for path in Path(kernel_dir).glob("*.py"):
        names[path.name] = {node.name for node in ast.walk(ast.parse(path.read_text()))
                            if isinstance(node, ast.FunctionDef)
                            and any(isinstance(d, ast.Attribute) and d.attr in DEVICE_DECORATORS
                                    for d in node.decorator_list)}
    return names


class _Tracer:
    """Line coverage of the kernel files, each line filed as device code or not."""

    def __init__(self, kernel_dir):
        self.root = str(Path(kernel_dir).resolve())
        self.roots = device_functions(kernel_dir)
        self.lines = {"device": defaultdict(set), "host": defaultdict(set)}

    def _in_device(self, frame):
        while frame is not None:
            file = frame.f_code.co_filename
            if file.startswith(self.root) and frame.f_code.co_name in self.roots.get(Path(file).name, ()):
                return True
            frame = frame.f_back
        return False

    def __call__(self, frame, event, arg):
        file = frame.f_code.co_filename
        if not file.startswith(self.root):
            return None
        if event == "line":
            kind = "device" if self._in_device(frame) else "host"
            self.lines[kind][Path(file).name].add(frame.f_lineno)
        return self

    def run(self, fn):
        self.lines = {"device": defaultdict(set), "host": defaultdict(set)}
        sys.settrace(self)
        try:
            result = fn()
        finally:
            sys.settrace(None)
        return result, {kind: {f: sorted(v) for f, v in files.items()} for kind, files in self.lines.items()}


def coverage(kernel_dir):
    """The real kernel's lines: {"import": {file: lines}, "variants": {variant name: {"device", "host"}},
    "launches": {file: lines}}, from tracing its import, each variant's compile and the launch digest."""
    from properties.mutants import probe

    _purge()
    tracer = _Tracer(kernel_dir)
    routing, imported = tracer.run(lambda: _import_copy(kernel_dir))
    variants = {}
    for key in routing.VARIANT_KEYS:
        with tempfile.TemporaryDirectory(prefix="coverage-") as folder:
            _, lines = tracer.run(lambda: routing.compile_artifacts(*key, folder))
        variants[probe.variant_name(*key)] = lines
    _, launches = tracer.run(probe.launch_digest)
    merge = defaultdict(set)
    for kind in imported.values():
        for file, lines in kind.items():
            merge[file].update(lines)
    return {"import": {f: sorted(v) for f, v in merge.items()}, "variants": variants,
            "launches": {f: sorted(set(launches["device"].get(f, [])) | set(launches["host"].get(f, [])))
                         for f in set(launches["device"]) | set(launches["host"])}}


def prefilter_one(kernel_dir, variants):
    """The static tier (first kill) of the copy at ``kernel_dir`` over ``variants`` alone."""
    from properties.mutants import probe

    _import_copy(kernel_dir)
    return probe.static(True, {tuple(v) for v in variants})


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    plan, result = json.loads(Path(argv[0]).read_text()), Path(argv[1])
    with open(result, "a") as out:
        if plan.get("coverage"):
            out.write(json.dumps({"coverage": coverage(plan["coverage"])}) + "\n")
            out.flush()
        for job in plan["mutants"]:
            started = time.perf_counter()
            try:
                row = {"name": job["name"], **prefilter_one(job["dir"], job["variants"]),
                       "seconds": round(time.perf_counter() - started, 2)}
            except Exception as exc:  # a copy that does not import or compile: its error, and the next copy
                row = {"name": job["name"], "error": f"{type(exc).__name__}: {exc}",
                       "traceback": traceback.format_exc()[-2000:]}
            out.write(json.dumps(row) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
