"""Where the CUDA toolkit's command-line tools are: PATH first, then each toolkit's bin/ under /usr/local."""

import shutil
from pathlib import Path


def find_tool(name, *more):
    """The executable ``name`` (compute-sanitizer, ncu, ...) on PATH, under /usr/local/cuda*/bin/, then at the
    glob patterns ``more`` under /; None when none is a file."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(Path("/usr/local").glob(f"cuda*/bin/{name}"))
    for pattern in more:
        candidates += sorted(Path("/").glob(pattern))
    return next((str(c) for c in candidates if c.is_file()), None)
