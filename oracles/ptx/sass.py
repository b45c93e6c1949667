"""The SASS side of a compiled kernel, through cuobjdump: disassembly, opcodes, and each kernel's registers,
shared memory, local memory (spills) and stack."""

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

def cuobjdump() -> Path:
    """The cuobjdump shipped in Triton's wheel (a project dependency), else the one on PATH."""
    import triton

    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if bundled.exists():
        return bundled
    found = shutil.which("cuobjdump")
    if found is None:
        raise FileNotFoundError("no cuobjdump: neither in Triton's wheel nor on PATH")
    return Path(found)


def _run_cuobjdump(cubin: bytes, flag: str) -> str:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(cubin)
        return subprocess.run([str(cuobjdump()), flag, str(path)], check=True, capture_output=True,
                              text=True).stdout


def sass(cubin: bytes) -> str:
    """``cuobjdump -sass`` of a cubin."""
    return _run_cuobjdump(cubin, "-sass")


def sass_opcodes(sass_text: str):
    """The SASS opcodes in order (predicates and operands dropped), e.g. ['LDG.E.128', 'ACQBULK', ...]."""
    out = []
    for line in sass_text.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if m:
            out.append(m.group(2))
    return out


_RESOURCE_FIELDS = re.compile(r"(REG|STACK|SHARED|LOCAL):(\d+)")


def _resources(line: str) -> dict:
    """One kernel's fields of a cuobjdump --dump-resource-usage line."""
    fields = dict(_RESOURCE_FIELDS.findall(line))
    if len(fields) != 4:
        raise ValueError(f"unexpected cuobjdump resource line: {line!r}")
    return {"registers": int(fields["REG"]), "shared_bytes": int(fields["SHARED"]),
            "local_bytes": int(fields["LOCAL"]), "stack_bytes": int(fields["STACK"])}


def resource_usage(cubin: bytes) -> dict:
    """Registers, shared memory, local memory (spills) and stack of the cubin's kernel, from cuobjdump."""
    text = _run_cuobjdump(cubin, "--dump-resource-usage")
    lines = [line for line in text.splitlines() if "REG:" in line]
    if len(lines) != 1:
        raise ValueError(f"unexpected cuobjdump resource report:\n{text}")
    return _resources(lines[0])


def binary_resource_usage(path) -> dict:
    """{mangled kernel name: resource_usage fields} of every kernel in an ELF or fatbin file (a .so, a cubin)."""
    text = subprocess.run([str(cuobjdump()), "--dump-resource-usage", str(path)], check=True, capture_output=True,
                          text=True).stdout
    found = re.findall(r"Function (\S+):\s*\n(.*REG:.*)", text)
    if not found:
        raise ValueError(f"no kernel in cuobjdump's resource report of {path}:\n{text}")
    return {name: _resources(line) for name, line in found}
