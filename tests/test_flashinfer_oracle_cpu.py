"""The FlashInfer oracle without a GPU: its library builds from the installed package and loads, holds
FlashInfer's one dyn-block kernel instance, reports CUDA errors, and the wrapper rejects bad arguments."""

import ctypes
import glob
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS, TOP_K
from oracles.flashinfer_routing import build, dyn_block_metadata, load_library
from oracles.ptx import sass

from helpers import demangle, needs_build

# The instance FlashInfer's runPostTopKPipeline dispatches for precomputed ids, 256 experts, top 8, FP32,
# demangled with whitespace removed.
_PARAMS = ("moe::dev::routing::routingCustom::KernelParams<float,float,256,8,moe::dev::routing::TopKExpertSelect<"
           "moe::dev::routing::NoOpPreprocess,moe::dev::routing::SoftmaxPostprocess>>")
_DYN_BLOCK_INSTANCE = f"voidmoe::dev::routing::routingCustom::routingIndicesDynBlockKernel<{_PARAMS}>({_PARAMS})"
_FILL_KERNEL = "fi_oracle::fillKernel(int*,int,int)"


def test_library_builds_and_loads(dyn_block_library):
    exported = subprocess.run(["nm", "-D", "--defined-only", str(dyn_block_library)], capture_output=True,
                              text=True, check=True).stdout.split()
    assert "fi_dyn_block_metadata" in exported
    entry = ctypes.CDLL(str(dyn_block_library)).fi_dyn_block_metadata
    assert ctypes.cast(entry, ctypes.c_void_p).value  # a loaded address, not NULL


def test_library_holds_only_flashinfers_dyn_block_instance_for_the_target_archs(dyn_block_library):
    listing = subprocess.run([str(sass.cuobjdump()), "-sass", str(dyn_block_library)], capture_output=True,
                             text=True, check=True).stdout
    assert set(re.findall(r"arch = (\w+)", listing)) == set(build.archs_from_env())
    kernels = demangle(re.findall(r"Function : (\S+)", listing))
    assert sorted(kernels) == sorted([_DYN_BLOCK_INSTANCE, _FILL_KERNEL])


@needs_build
def test_build_reads_flashinfer_from_the_installed_package():
    data = build.flashinfer_data_dir()
    command = build.nvcc_command(build.DEFAULT_ARCHS, Path("out.so"), data)
    package_includes = [flag for flag in command if flag.startswith(f"-I{data}")]
    assert len(package_includes) == len(build._PACKAGE_INCLUDES)
    assert "-cudart" in command and command[command.index("-cudart") + 1] == "static"
    stand_ins = [Path(p) for p in glob.glob(f"{build.STAND_INS}/**/*.h", recursive=True)]
    assert {p.name for p in stand_ins} == {"cublasLt.h", "cublas_v2.h", "tvm_ffi_utils.h", "DtypeDecl.h",
                                           "SfLayoutDecl.h"}


@needs_build
def test_bad_arch_is_refused():
    with pytest.raises(ValueError, match="arch"):
        build.nvcc_command(["90a"], Path("out.so"), build.flashinfer_data_dir())


def test_cuda_error_raises_with_its_name(dyn_block_library):
    """Without a usable device (none here, or hidden on a GPU machine) the call fails loudly."""
    code = ("import numpy as np\n"
            "from oracles.flashinfer_routing import dyn_block_metadata, FlashInferOracleError\n"
            "try:\n"
            "    dyn_block_metadata(np.arange(8, dtype=np.int32).reshape(1, 8), 0, 256, 8)\n"
            "except FlashInferOracleError as e:\n"
            "    print(e)\n")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(build.REPO_ROOT))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                            check=True, cwd=build.REPO_ROOT)
    assert re.search(r"status 2\): cudaMalloc: cudaError\w+", result.stdout), result.stdout + result.stderr


def test_library_refuses_buffers_smaller_than_the_routes(dyn_block_library):
    library = load_library()
    ids = np.zeros(TOP_K, np.int32)
    small = np.zeros(TOP_K - 1, np.int32)
    scalars = np.zeros(2, np.int32)
    message = ctypes.create_string_buffer(256)
    i32p = ctypes.POINTER(ctypes.c_int32)
    ptr = lambda a: a.ctypes.data_as(i32p)  # noqa: E731
    status = library.fi_dyn_block_metadata(ptr(ids), 1, EXPERTS, TOP_K, 0, EXPERTS, 1, -2, ptr(small),
                                           small.size, ptr(small), ptr(small), small.size, ptr(small),
                                           small.size, ptr(scalars), message, len(message))
    assert status == 1 and b"bad shape" in message.value


def _ids(b=1):
    return np.arange(b * TOP_K, dtype=np.int32).reshape(b, TOP_K)


@pytest.mark.parametrize("ids, match", [
    (_ids().astype(np.int64), "int32"),
    (_ids().tolist(), "int32"),
    (_ids().reshape(-1), r"shape \[b, 8\]"),
    (np.zeros((1, TOP_K + 1), np.int32), r"shape \[b, 8\]"),
    (np.zeros((0, TOP_K), np.int32), "1 <= b <= 8"),
    (_ids(MAX_TOKENS + 1) % EXPERTS, "1 <= b <= 8"),
    (_ids() - 1, r"\[0, 256\)"),
    (_ids() + EXPERTS - TOP_K + 1, r"\[0, 256\)"),
    (np.array([[3, 1, 4, 1, 5, 9, 2, 6]], np.int32), "race"),
])
def test_bad_ids_are_refused(ids, match):
    with pytest.raises(ValueError, match=match):
        dyn_block_metadata(ids, 0, EXPERTS, 8)


def test_repeat_in_a_later_token_names_the_token():
    ids = _ids(3)
    ids[2, 7] = ids[2, 0]
    with pytest.raises(ValueError, match="token 2"):
        dyn_block_metadata(ids, 0, EXPERTS, 8)


@pytest.mark.parametrize("offset, count, tile, poison, name", [
    (-1, 1, 8, -2, "local_expert_offset"),
    (EXPERTS + 1, 0, 8, -2, "local_expert_offset"),
    (True, 1, 8, -2, "local_expert_offset"),
    (1.0, 1, 8, -2, "local_expert_offset"),
    (0, -1, 8, -2, "num_local_experts"),
    (0, EXPERTS + 1, 8, -2, "num_local_experts"),
    (200, 57, 8, -2, "num_local_experts"),
    (0, EXPERTS, 0, -2, "tile_n"),
    (0, EXPERTS, MAX_TILE + 1, -2, "tile_n"),
    (0, EXPERTS, 8.0, -2, "tile_n"),
    (0, EXPERTS, 8, -1, "poison"),
    (0, EXPERTS, 8, 0, "poison"),
    (0, EXPERTS, 8, -(2**31) - 1, "poison"),
])
def test_bad_scalars_are_refused(offset, count, tile, poison, name):
    with pytest.raises(ValueError, match=name):
        dyn_block_metadata(_ids(), offset, count, tile, poison=poison)


def test_library_resources_are_read_per_kernel(dyn_block_library):
    found = sass.binary_resource_usage(dyn_block_library)
    assert sorted(demangle(list(found))) == sorted([_DYN_BLOCK_INSTANCE, _FILL_KERNEL])
    assert all(r["registers"] > 0 and r["local_bytes"] == 0 for r in found.values())


def test_enqueue_entry_refuses_null_buffers_before_touching_cuda(dyn_block_library):
    """The enqueue entry checks its arguments first, so this runs without a device."""
    entry = load_library().fi_dyn_block_enqueue
    entry.restype = ctypes.c_int
    message = ctypes.create_string_buffer(256)
    args = [None, 1, EXPERTS, TOP_K, 0, EXPERTS, 8, *[None] * 6, 0, message, len(message)]
    entry.argtypes = [ctypes.c_void_p, *[ctypes.c_int32] * 6, *[ctypes.c_void_p] * 6, ctypes.c_int32,
                      ctypes.c_char_p, ctypes.c_int32]
    assert entry(*args) == 1 and b"bad arguments" in message.value


def test_enqueue_wrapper_refuses_host_and_mistyped_ids():
    import torch

    from oracles.flashinfer_routing.enqueue import device_buffers
    with pytest.raises(ValueError, match="CUDA device"):
        device_buffers(torch.zeros((1, TOP_K), dtype=torch.int32), 8)
    with pytest.raises(ValueError, match=r"int32 torch.Tensor \[b, 8\]"):
        device_buffers(torch.zeros((1, TOP_K), dtype=torch.int64), 8)
    with pytest.raises(ValueError, match=r"int32 torch.Tensor \[b, 8\]"):
        device_buffers(torch.zeros((MAX_TOKENS + 1, TOP_K), dtype=torch.int32), 8)
    with pytest.raises(ValueError, match="int32 torch.Tensor"):
        device_buffers(_ids(), 8)


def test_buffers_in_meta_refuse_a_metadata_tensor_of_another_size_or_type(monkeypatch):
    import torch

    from kernel.layout import metadata_size
    from oracles.flashinfer_routing import enqueue
    monkeypatch.setattr(enqueue, "_check_ids_tensor", lambda ids: None)  # CPU ids: only meta is checked here
    ids = torch.zeros((1, TOP_K), dtype=torch.int32)
    for meta in (torch.zeros(metadata_size(8) - 1, dtype=torch.int32), torch.zeros(metadata_size(8)),
                 torch.zeros((metadata_size(8), 2), dtype=torch.int32)[:, 0], None):
        with pytest.raises(ValueError, match=r"meta must be a contiguous int32 tensor of metadata_size\(8\)"):
            enqueue.buffers_in_meta(ids, meta, 8)
    assert enqueue.buffers_in_meta(ids, torch.zeros(metadata_size(8), dtype=torch.int32), 8).tile_n == 8


def test_metadata_outputs_read_back_field_by_field_and_name_a_wrong_buffer():
    """The metadata outputs both FlashInfer launches write (enqueue.MetadataOutputs): each tensor lands in its own
    DynBlockMetadata field, the two sizes from the scalars; a buffer of the wrong size is named."""
    import dataclasses

    import torch

    from oracles.flashinfer_routing.enqueue import MetadataOutputs

    tile = 4
    outputs = MetadataOutputs(**MetadataOutputs.allocate(torch.device("cpu"), tile))
    for i, out in enumerate(outputs.outputs()):
        out.copy_(torch.arange(out.numel(), dtype=torch.int32) + 1000 * i)
    got = outputs.read_metadata(poison=-7)
    for i, name in enumerate(("expanded_to_permuted", "cta_batch", "cta_limit", "permuted_to_token")):
        assert np.array_equal(getattr(got, name), np.arange(getattr(got, name).size) + 1000 * i), name
    assert (got.padded_tokens, got.num_ctas, got.tile_n, got.poison) == (4000, 4001, tile, -7)
    outputs.check_outputs(torch.device("cpu"))
    short = dataclasses.replace(outputs, cta_limit=outputs.cta_limit[:-1])
    with pytest.raises(ValueError, match="buffers.cta_limit must be a contiguous int32 tensor of"):
        short.check_outputs(torch.device("cpu"))
