"""Helpers more than one test file uses (fixtures live in conftest.py): the FlashInfer build's skip mark and
kernel names demangled."""

import subprocess

import pytest

from oracles.flashinfer_routing import build

# A GPU runner without package access has the libraries prebuilt by `make gpu-bundle`, not the sources or nvcc:
# the build's checks are then skipped under the name the gate accepts (a failure under VERIFY_REQUIRE_GPU=1
# only when no library is there either).
needs_build = pytest.mark.skipif(build.unavailable() is not None, reason=f"{build.NOT_RUN}: {build.unavailable()}")


def demangle(names):
    """``names`` through c++filt, whitespace removed, in order."""
    result = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
    return ["".join(name.split()) for name in result.stdout.split("\n")[:len(names)]]
