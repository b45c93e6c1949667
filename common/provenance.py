"""Where a result came from: the CUDA device (or why there is none), the GPU, the host, package versions, the
commit and the date. The one collector of provenance for measurements, case files and benchmarks.

Set GIT_COMMIT on a machine whose copy of the tree has no .git.
"""

import importlib.metadata
import os
import platform
import subprocess
import time
from functools import lru_cache
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
NVIDIA_SMI_TIMEOUT_S = 30
# The distributions whose versions every record names: what computes, compiles, builds and checks the results.
PACKAGES = ("numpy", "torch", "triton", "nvidia-cutlass-dsl", "apache-tvm-ffi", "flashinfer-python", "hypothesis",
            "pytest", "pytest-xdist", "jsonschema")


def shown(path):
    """``path`` as records and lines name it: relative to the repository where it lies inside, else absolute."""
    path = Path(path).resolve()
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


@lru_cache(maxsize=None)
def cuda_reason():
    """None when a CUDA device is usable, else why not."""
    try:
        import torch
    except ImportError as exc:
        return f"torch is not importable ({exc})"
    return None if torch.cuda.is_available() else "no CUDA device on this machine"


def nvidia_smi(field):
    """One ``nvidia-smi --query-gpu`` field of the first GPU (raises when nvidia-smi fails)."""
    out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"], capture_output=True,
                         text=True, check=True, timeout=NVIDIA_SMI_TIMEOUT_S).stdout.splitlines()
    return out[0].strip() if out else "no output"


def gpu():
    """The GPU and the software that drives it: name, compute capability, driver, CUDA, torch, Triton, NumPy."""
    import numpy
    import torch
    import triton

    props = torch.cuda.get_device_properties(0)
    try:
        driver = nvidia_smi("driver_version")
    except (OSError, subprocess.SubprocessError):
        driver = "unknown"
    return {"gpu": props.name, "compute_capability": f"{props.major}.{props.minor}", "driver": driver,
            "cuda": torch.version.cuda, "torch": torch.__version__, "triton": triton.__version__,
            "numpy": numpy.__version__}


def version(dist):
    """The installed version of distribution ``dist``, or None."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def commit():
    """GIT_COMMIT, else git's HEAD (marked when tracked files changed), else a note saying neither exists."""
    if os.environ.get("GIT_COMMIT"):
        return os.environ["GIT_COMMIT"]
    try:
        git = ["git", "-C", str(REPO_ROOT)]
        head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(git + ["status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, check=True).stdout.strip()
        return head + ("+uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git; set GIT_COMMIT)"


def utc_now():
    """The date and time now, ISO 8601 in UTC."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def host():
    """The host: CPU model, cores, load average, Python version."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    return {"cpu": model, "cores": cores, "load_average": load, "python": platform.python_version()}


def record(packages=PACKAGES):
    """The provenance every writer of a record uses: the GPU (``gpu()``'s fields, or gpu None without one), the
    machine, the versions of ``packages`` (the one list, PACKAGES, unless a caller names others), the commit and
    the date."""
    env = {"gpu": None}
    if cuda_reason() is None:
        env.update(gpu())
    env.update(machine=platform.machine(), python=platform.python_version(),
               packages={dist: version(dist) for dist in packages}, commit=commit(), date=utc_now())
    return env
