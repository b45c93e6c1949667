"""Build FlashInfer's routing kernels into shared libraries from the installed package's sources.

Two libraries, one code path (``LIBRARIES``): ``libfi_dyn_block.so``, the metadata oracle (FlashInfer's
routingIndicesDynBlockKernel on given ids, ``dyn_block_oracle.cu``), and ``libfi_fused_routing.so``, the
benchmark's peer (FlashInfer's routingCustom::run from logits as its routing runner calls it,
``fused_peer.cu`` and ``fused_peer_kernels.cu``). Only the project's translation units and header stand-ins
live in the repository; every FlashInfer header is read from the installed ``flashinfer-python`` package
at build time. Needs nvcc, not a GPU. The CUDA runtime is linked statically, so a library runs on a
machine with a driver and no toolkit.

    python -m oracles.flashinfer_routing [--arch sm_90a ...] [--force]
"""

import argparse
import fcntl
import hashlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from common.args import OneLineParser

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
STAND_INS = HERE / "stand_ins"
BUILD_DIR = REPO_ROOT / "build" / "flashinfer_oracle"


@dataclass(frozen=True)
class Library:
    """One shared library: the project's translation units, the project headers they include, its file."""

    stem: str
    sources: tuple
    headers: tuple = ()

    @property
    def path(self) -> Path:
        return BUILD_DIR / f"{self.stem}.so"

    @property
    def stamp(self) -> Path:
        """What the library was built from; a differing build (sources, flags, package) rebuilds it."""
        return BUILD_DIR / f"{self.stem}.stamp"

    @property
    def lock(self) -> Path:
        return BUILD_DIR / f".{self.stem}.lock"


DYN_BLOCK = Library("libfi_dyn_block", (HERE / "dyn_block_oracle.cu",), (HERE / "selected_instance.cuh",))
FUSED_PEER = Library("libfi_fused_routing", (HERE / "fused_peer.cu", HERE / "fused_peer_kernels.cu"),
                     (HERE / "fused_peer_narrow.cuh", HERE / "selected_instance.cuh"))
LIBRARIES = (DYN_BLOCK, FUSED_PEER)
# The libraries' paths and the oracle's source, by the names the rest of the harness uses.
SOURCE = DYN_BLOCK.sources[0]
LIBRARY = DYN_BLOCK.path
FUSED_LIBRARY = FUSED_PEER.path

FLASHINFER_DIST = "flashinfer-python"
FLASHINFER_VERSION = "0.7.2.post1"
ARCHS_ENV = "FLASHINFER_ORACLE_ARCHS"
DEFAULT_ARCHS = ("sm_90a",)
_ARCH = re.compile(r"sm_(\d+[af]?)")

# FlashInfer's own flags for its routing module (flashinfer/jit/moe_utils.py, jit/fused_moe.py, jit/cpp_ext.py).
_DEFINES = ["-DTLLM_ENABLE_CUDA", "-DTLLM_GEN_EXPORT_INTERFACE", "-DENABLE_BF16", "-DENABLE_FP8",
            "-DENABLE_FP4"]
_FLAGS = ["-std=c++17", "-O3", "--expt-relaxed-constexpr", "-static-global-template-stub=false",
          "-shared", "--compiler-options=-fPIC", "-cudart", "static"]
# Relative to the package's data folder. CCCL comes first: FlashInfer puts its vendored copy ahead of the
# toolkit's (jit/cpp_ext.py), so the oracle builds against the CCCL FlashInfer ships.
_PACKAGE_INCLUDES = ["cccl/cub", "cccl/libcudacxx/include", "cccl/thrust", "include",
                     "csrc/fused_moe/trtllm_backend", "csrc/nv_internal/include", "cutlass/include",
                     "spdlog/include"]


def flashinfer_data_dir() -> Path:
    """The installed FlashInfer package's ``data`` folder (its headers), found without importing it."""
    try:
        version = importlib.metadata.version(FLASHINFER_DIST)
    except importlib.metadata.PackageNotFoundError:
        version = None
    if version != FLASHINFER_VERSION:
        raise RuntimeError(f"the oracle builds from {FLASHINFER_DIST}=={FLASHINFER_VERSION}, found "
                           f"{version}: pip install --no-deps {FLASHINFER_DIST}=={FLASHINFER_VERSION}")
    spec = importlib.util.find_spec("flashinfer")
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    if not (data / "csrc/fused_moe/trtllm_backend/trtllm_fused_moe_routing_custom.cuh").is_file():
        raise RuntimeError(f"{data} lacks FlashInfer's routing sources")
    return data


def archs_from_env() -> tuple:
    """Target architectures: $FLASHINFER_ORACLE_ARCHS (space or comma separated), else sm_90a."""
    value = os.environ.get(ARCHS_ENV, "").replace(",", " ").split()
    return tuple(value) or DEFAULT_ARCHS


def _gencode(arch: str) -> str:
    match = _ARCH.fullmatch(arch)
    if match is None:
        raise ValueError(f"arch must look like sm_90a or sm_90, got {arch!r}")
    return f"-gencode=arch=compute_{match.group(1)},code={arch}"


def _arch(text):
    """An --arch value: a target nvcc takes (sm_90a, sm_100a, sm_90)."""
    try:
        _gencode(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def nvcc_command(archs, output: Path, data: Path, library: Library = DYN_BLOCK) -> list:
    """The nvcc command line that builds ``library`` into ``output``."""
    includes = [f"-I{STAND_INS}"] + [f"-I{data / sub}" for sub in _PACKAGE_INCLUDES]
    return ([_nvcc(), *_FLAGS, *_DEFINES, *(_gencode(a) for a in archs), *includes,
             *(str(source) for source in library.sources), "-o", str(output)])


NO_NVCC = "nvcc not on PATH"
# How a skipped build is named in test reports and by `make verify`'s gate (which accepts it).
NOT_RUN = "FlashInfer build not run"


def _nvcc() -> str:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise RuntimeError(f"{NO_NVCC}: the FlashInfer oracle is built with the CUDA toolkit")
    return nvcc


def unavailable():
    """None when the library can be built here, else why not (nvcc missing, or the sources)."""
    if shutil.which("nvcc") is None:
        return NO_NVCC
    try:
        flashinfer_data_dir()
    except RuntimeError:
        return f"{FLASHINFER_DIST}=={FLASHINFER_VERSION} sources not installed"
    return None


def _fingerprint(command, library: Library) -> str:
    digest = hashlib.sha256("\0".join(command).encode())
    for path in [*library.sources, *library.headers, *sorted(p for p in STAND_INS.rglob("*") if p.is_file())]:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def build(archs=None, force: bool = False, library: Library = DYN_BLOCK) -> Path:
    """Build ``library`` unless an identical build is in place; return its path.

    Safe under concurrent callers (pytest-xdist workers): one builds, the others wait and reuse it.
    """
    archs = tuple(archs or archs_from_env())
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    partial = library.path.with_suffix(".so.partial")
    command = nvcc_command(archs, partial, flashinfer_data_dir(), library)
    fingerprint = _fingerprint(command, library)
    with open(library.lock, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and library.path.is_file() and library.stamp.is_file() \
                and library.stamp.read_text() == fingerprint:
            return library.path
        result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"nvcc failed ({result.returncode}):\n{' '.join(command)}\n{result.stderr}")
        os.replace(partial, library.path)
        library.stamp.write_text(fingerprint)
    return library.path


def build_all(archs=None, force: bool = False) -> list:
    """Build every library of ``LIBRARIES`` (each unless up to date); their paths."""
    return [build(archs, force, library) for library in LIBRARIES]


def main(argv=None) -> int:
    parser = OneLineParser(prog="python -m oracles.flashinfer_routing", description=__doc__.splitlines()[0])
    parser.add_argument("--arch", action="append", type=_arch, help=f"target, e.g. sm_90a (default: ${ARCHS_ENV} "
                                                                    f"or {' '.join(DEFAULT_ARCHS)}); repeatable")
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    args = parser.parse_args(argv)
    if not args.arch:
        try:
            [_gencode(arch) for arch in archs_from_env()]
        except ValueError as exc:
            parser.error(f"${ARCHS_ENV}: {exc}")
    reason = unavailable()
    if reason is None:
        for path in build_all(args.arch, force=args.force):
            print(path)
        return 0
    # Without nvcc: the oracle's prebuilt library is what `make verify` needs; the peer's serves the bench.
    if not FUSED_LIBRARY.is_file():
        print(f"{NOT_RUN}: {reason}; no prebuilt {FUSED_LIBRARY}: the benchmark's FlashInfer peer cannot run",
              file=sys.stderr)
    if LIBRARY.is_file():
        print(f"{NOT_RUN}: {reason}; the prebuilt {LIBRARY} is used")
        return 0
    print(f"{NOT_RUN}: {reason}; no prebuilt {LIBRARY} either", file=sys.stderr)
    return 1
