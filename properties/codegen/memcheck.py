"""Every memory access of the kernel in bounds, under NVIDIA compute-sanitizer's memcheck: in a child process
under the tool, route launches each kernel of KERNELS (both weight modes, with metadata and without) on rows
b = 1, 2, 3 and 8. A store one word past a shared array or a tensor that nothing reads back changes no output,
so no comparison sees it; memcheck does. The one check of this room that runs the kernel (a GPU and the CUDA
toolkit's compute-sanitizer)."""

import json
import os
import subprocess
import sys
from pathlib import Path

from common.cuda_tools import find_tool
from common.provenance import REPO_ROOT

TIMEOUT_S = 540
ERROR_EXIT = 86  # the tool's exit status when it found an error, told apart from the script's own failures
MAX_LINES = 12
BANNER = "COMPUTE-SANITIZER"  # the tool's first line, before any finding

# (b, tile_n) launched with metadata and without: every kernel of KERNELS, the largest tile, the most rows.
SHAPES = ((1, 1), (2, 1), (2, 8), (3, 8), (8, 1), (8, 256))
SCRIPT = r'''
import json, sys
from pathlib import Path
import torch
from kernel import routing
if Path(routing.__file__).resolve().parent != Path(sys.argv[2]):
    sys.exit(f"imported kernel.routing from {routing.__file__}, not the kernel under test in {sys.argv[2]}")
from kernel.layout import EXPERTS, TOP_K, metadata_size
device = torch.device("cuda", torch.cuda.current_device())
generator = torch.Generator(device=device).manual_seed(5)
bias = torch.randn(EXPERTS, device=device, generator=generator) * 0.1
for renormalize in (True, False):
    for b, tile_n in json.loads(sys.argv[1]):
        logits = torch.randn(b, EXPERTS, device=device, generator=generator)
        ids = torch.empty(b, TOP_K, dtype=torch.int32, device=device)
        weights = torch.empty(b, TOP_K, dtype=torch.float32, device=device)
        metadata = torch.empty(metadata_size(tile_n), dtype=torch.int32, device=device)
        routing.route(logits, bias, ids, weights, 2.5, renormalize)
        routing.route(logits, bias, ids, weights, 2.5, renormalize, metadata, 0, EXPERTS, tile_n)
torch.cuda.synchronize()
print("launched", 4 * len(json.loads(sys.argv[1])))
'''


def breaches(timeout=TIMEOUT_S):
    """memcheck's error lines for the imported kernel (empty: every access in bounds); RuntimeError when the tool
    is missing or the run fails for another reason, so a run that checked nothing is never a pass."""
    tool = find_tool("compute-sanitizer")
    if tool is None:
        raise RuntimeError("memcheck: no compute-sanitizer on PATH or under /usr/local/cuda*/bin")
    import kernel.routing

    under_test = Path(kernel.routing.__file__).resolve().parent  # the imported kernel: a mutant's copy, or the real
    path = [str(under_test.parent), str(REPO_ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    done = subprocess.run([tool, "--tool", "memcheck", "--error-exitcode", str(ERROR_EXIT), "--print-limit", "8",
                           "--report-api-errors", "no",
                           sys.executable, "-c", SCRIPT, json.dumps(SHAPES), str(under_test)], cwd=under_test.parent,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(path)}, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode == ERROR_EXIT:
        lines = [line.removeprefix("=========").strip() for line in done.stdout.splitlines()
                 if line.startswith("=========")]
        lines = [line for line in lines if line and line != BANNER]
        return [f"memcheck: {line}" for line in lines[:MAX_LINES]] or ["memcheck: the tool reported an error"]
    if done.returncode != 0 or f"launched {4 * len(SHAPES)}" not in done.stdout:
        raise RuntimeError(f"memcheck: the run failed (exit {done.returncode}): "
                           f"{(done.stdout + done.stderr).strip().splitlines()[-3:]}")
    return []
