"""Helpers more than one test file uses (fixtures live in conftest.py): the gate's switches, the FlashInfer
build's skip marks, kernel names demangled, the RoutingCase of some rows, a launch's arguments as tensors again,
and what the primitives' exhaustive proof covers."""

import ctypes
import subprocess

import numpy as np
import pytest
import torch

from kernel.layout import EXPERTS, TOP_K
from oracles.flashinfer_routing import build
from properties.engine.cases import RoutingCase
from properties.engine.plugins import ENV as PLUGINS_ENV
from properties.tools.gate import REQUIRE_FRESH_ENV, REQUIRE_GPU_ENV

# The switches the gate reads from its environment (conftest.py unsets them for every test).
# `VERIFY_REQUIRE_GPU=1 make verify` on a GPU runner exports them to the suite its gate runs; a test that runs a
# gate (gate.main in-process, or the gate or make in a subprocess given os.environ) would otherwise judge it by
# the outer run's settings: an inner gate requiring fresh evidence fails on a record it was never about.
GATE_SWITCHES = (REQUIRE_GPU_ENV, REQUIRE_FRESH_ENV, PLUGINS_ENV)

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


def _host_tensor(address, dtype, shape, strides):
    """A CPU tensor over the host memory at ``address`` (what a kernel given that address reads and writes)."""
    count = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    words = (ctypes.c_int32 * count).from_address(address)
    return torch.from_numpy(np.ctypeslib.as_array(words)).view(dtype).as_strided(shape, strides)


def launched_tensors(args):
    """A compiled variant's launch arguments (kernel.routing.launch_arguments', the stream last) turned back
    into route's: CPU tensors over the addresses, the float32 scale, with metadata its tensor and scalars."""
    logits, bias, ids, weights, rows, row_stride, scale32, *rest = args[:-1]
    tensors = (_host_tensor(logits, torch.float32, (rows, EXPERTS), (row_stride, 1)),
               _host_tensor(bias, torch.float32, (EXPERTS,), (1,)),
               _host_tensor(ids, torch.int32, (rows, TOP_K), (TOP_K, 1)),
               _host_tensor(weights, torch.float32, (rows, TOP_K), (TOP_K, 1)), scale32)
    if not rest:
        return tensors
    metadata, size, *scalars = rest
    return tensors + (_host_tensor(metadata, torch.int32, (size,), (1,)), *scalars)
