"""Helpers more than one test file uses (fixtures live in conftest.py): the FlashInfer build's skip marks,
kernel names demangled, the RoutingCase of some rows, and what the primitives' exhaustive proof covers."""

import subprocess

import numpy as np
import pytest

from oracles.flashinfer_routing import build
from properties.engine.cases import RoutingCase

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


NO_METADATA = (None, 0, 0)


def case_of(label, rows, bias, scale, renormalize, request=NO_METADATA):
    """The RoutingCase of these rows; ``request`` is (tile_n, local_expert_offset, num_local_experts)."""
    return RoutingCase(np.ascontiguousarray(rows), bias, np.float32(scale), renormalize, *request, label)


# The entries of oracles/mufu/data/exhaustive-proof.json: each primitive swept over all 2^32 inputs, and
# div_full_f32 over exponent pairs.
PRIMITIVES_SWEPT = ("ex2_approx_ftz_f32", "ex2_approx_f32", "rcp_approx_ftz_f32", "sigmoid_f32",
                    "div_full_f32(1.0, y)")
DIV_PAIRS = "div_full_f32(x, y) exponent pairs"
