"""Helpers more than one test file uses (fixtures live in conftest.py): the FlashInfer build's skip marks and
kernel names demangled."""

import subprocess

import pytest

from oracles.flashinfer_routing import build

# A GPU runner without package access has the libraries prebuilt by `make gpu-bundle`, not the sources or nvcc:
# the build's checks are then skipped under the name the gate accepts (a failure under VERIFY_REQUIRE_GPU=1
# only when no library is there either).
needs_build = pytest.mark.skipif(build.unavailable() is not None, reason=f"{build.NOT_RUN}: {build.unavailable()}")


def _sources_missing():
    """None when FlashInfer's sources are installed (build.flashinfer_data_dir() finds them), else why not."""
    try:
        build.flashinfer_data_dir()
    except RuntimeError as exc:
        return str(exc)
    return None


# For a check that reads FlashInfer's sources but runs no nvcc.
needs_sources = pytest.mark.skipif(_sources_missing() is not None, reason=f"{build.NOT_RUN}: {_sources_missing()}")


def demangle(names):
    """``names`` through c++filt, whitespace removed, in order."""
    result = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
    return ["".join(name.split()) for name in result.stdout.split("\n")[:len(names)]]
