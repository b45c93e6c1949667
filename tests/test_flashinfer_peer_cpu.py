"""FlashInfer's fused routing peer without a GPU: its build command, the library's two kernel instances and
entry point, the kernel thresholds read from FlashInfer's sources, and the wrapper's argument errors."""

import ctypes
import re
import subprocess
from pathlib import Path

import pytest
import torch

from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS, TOP_K
from oracles.flashinfer_routing import build, fused_peer
from oracles.ptx import sass

from helpers import demangle, needs_build, needs_sources

# The instance FlashInfer's dispatch selects for SigmoidBias + ScaledSumNormalize, 256 experts, top 8, FP32
# weights, demangled with whitespace removed.
_PARAMS = ("moe::dev::routing::routingCustom::KernelParams<float,float,256,8,moe::dev::routing::TopKExpertSelect<"
           "moe::dev::routing::SigmoidBiasPreprocess,moe::dev::routing::ScaledSumNormalizePostprocess>>")
_INSTANCES = [f"voidmoe::dev::routing::routingCustom::{kernel}<{_PARAMS}>({_PARAMS})"
              for kernel in ("routingIndicesBlockKernel", "routingIndicesDynBlockKernel")]

@needs_build
def test_build_command_compiles_both_units_with_flashinfers_flags_for_the_target_arch():
    data = build.flashinfer_data_dir()
    command = build.nvcc_command(("sm_90a",), Path("out.so"), data, build.FUSED_PEER)
    assert command[-2:] == ["-o", "out.so"]
    assert command[-4:-2] == [str(build.HERE / "fused_peer.cu"), str(build.HERE / "fused_peer_kernels.cu")]
    for flag in (*build._DEFINES, *build._FLAGS, "-gencode=arch=compute_90a,code=sm_90a", f"-I{build.STAND_INS}"):
        assert flag in command
    assert [f for f in command if f.startswith(f"-I{data}")] == [f"-I{data / s}" for s in build._PACKAGE_INCLUDES]
    oracle = build.nvcc_command(("sm_90a",), Path("out.so"), data)
    assert oracle[:-4] == command[:-5] and oracle[-3] == str(build.SOURCE)


def test_each_library_has_its_own_fingerprint_covering_its_own_headers():
    command = ["nvcc", "x"]
    assert build._fingerprint(command, build.DYN_BLOCK) != build._fingerprint(command, build.FUSED_PEER)
    assert build.FUSED_PEER.headers == (build.HERE / "fused_peer_narrow.cuh", build.HERE / "selected_instance.cuh")
    assert build.DYN_BLOCK.headers == (build.HERE / "selected_instance.cuh",)
    assert [lib.path.name for lib in build.LIBRARIES] == ["libfi_dyn_block.so", "libfi_fused_routing.so"]


def test_narrowing_names_flashinfers_instance_and_records_every_other_launch():
    """Reads the narrowing's source text only: it detects an edit to these lines (fused_peer_narrow.cuh,
    selected_instance.cuh and the two translation units), not what they compile to; the instances the library
    holds are checked from its SASS below."""
    narrow = (build.HERE / "fused_peer_narrow.cuh").read_text()
    for fact in ("using PreProc = routing::SigmoidBiasPreprocess;",
                 "using PostProc = routing::ScaledSumNormalizePostprocess;", "constexpr int kTierExperts = 256;",
                 "constexpr int kTierTopK = 8;", '#include "selected_instance.cuh"',
                 "fi_narrow::dispatchSelects<PreProc, PostProc, kTierExperts, kTierTopK>(data)",
                 "#define LAUNCH_ROUTING_WITH_POLICIES(data, coopLaunch, kernel, ...) ::fi_peer::uncompiled(#kernel)",
                 "#define LAUNCH_ROUTING_CUSTOM_NO_POLICY(data, coopLaunch, kernel, ...) ::fi_peer::uncompiled"):
        assert fact in narrow, fact
    assert "data.mDtypeOutput == moe::dev::routing::tg::Dtype::Fp32" in \
        (build.HERE / "selected_instance.cuh").read_text()
    entry = (build.HERE / "fused_peer.cu").read_text()
    assert "#define FLASHINFER_ROUTING_CUSTOM_ENTRY" in entry and "custom::run(data, stream);" in entry
    assert "#define FLASHINFER_ROUTING_CUSTOM_BLOCK_GROUP" in (build.HERE / "fused_peer_kernels.cu").read_text()


@needs_sources
def test_kernel_thresholds_are_flashinfers():
    """expected_kernel's boundary is FlashInfer's BlockKernelMaxNumTokens; the bench's b stays within the
    dyn-block kernel's token limit, and the SigmoidBias policy's first tier for 256 experts is Tier<256, 8>."""
    policy = (build.flashinfer_data_dir() / "include/flashinfer/trtllm/fused_moe/RoutingCustomPolicy.cuh").read_text()
    constants = dict(re.findall(r"static constexpr int (\w+) = (\d+);", policy))
    assert int(constants["BlockKernelMaxNumTokens"]) == fused_peer.BLOCK_KERNEL_MAX_TOKENS
    assert MAX_TOKENS <= int(constants["DynBlockKernelMaxNumTokens"])
    assert EXPERTS <= int(constants["DynBlockKernelMaxNumExperts"])
    tiers = re.search(r"struct PolicyTraits<SigmoidBiasPreprocess, ScaledSumNormalizePostprocess> \{(.*?)\};",
                      policy, re.S).group(1)
    first = next((e, k) for e, k in map(lambda t: (int(t[0]), int(t[1])), re.findall(r"Tier<(\d+), (\d+)>", tiers))
                 if EXPERTS <= e and TOP_K <= k)
    assert first == (256, 8)
    assert [fused_peer.expected_kernel(b) for b in (1, 4, 5, 8)] == [
        "routingIndicesBlockKernel", "routingIndicesBlockKernel", "routingIndicesDynBlockKernel",
        "routingIndicesDynBlockKernel"]


def test_library_holds_only_the_block_and_dyn_block_instances(fused_peer_library):
    listing = subprocess.run([str(sass.cuobjdump()), "-sass", str(fused_peer_library)], capture_output=True,
                             text=True, check=True).stdout
    assert set(re.findall(r"arch = (\w+)", listing)) == set(build.archs_from_env())
    assert sorted(demangle(re.findall(r"Function : (\S+)", listing))) == sorted(_INSTANCES)


def test_library_links_every_flashinfer_symbol_it_uses(fused_peer_library):
    undefined = subprocess.run(["nm", "-D", "--undefined-only", "-C", str(fused_peer_library)],
                               capture_output=True, text=True, check=True).stdout
    assert "moe::" not in undefined and "tensorrt_llm" not in undefined and "flashinfer" not in undefined
    exported = subprocess.run(["nm", "-D", "--defined-only", str(fused_peer_library)], capture_output=True,
                              text=True, check=True).stdout.split()
    assert "fi_fused_routing_enqueue" in exported


def test_entry_refuses_bad_arguments_before_touching_cuda(fused_peer_library):
    """The entry checks its arguments first, so this runs without a device."""
    entry = ctypes.CDLL(str(fused_peer_library)).fi_fused_routing_enqueue
    entry.restype = ctypes.c_int
    entry.argtypes = fused_peer.load_library().fi_fused_routing_enqueue.argtypes
    message = ctypes.create_string_buffer(512)
    kernel = ctypes.c_int32(7)
    args = [None, None, 1, EXPERTS, TOP_K, 2.5, 0, EXPERTS, 8, *[None] * 9, None, 1, ctypes.byref(kernel),
            message, len(message)]
    assert entry(*args) == 1 and b"bad arguments" in message.value and kernel.value == 0


def _host(shape, dtype=torch.float32):
    return torch.zeros(shape, dtype=dtype)


@pytest.mark.parametrize("logits, bias, tile, match", [
    (_host((1, EXPERTS)), _host(EXPERTS), 8, "contiguous tensor on a CUDA device"),
    (_host((1, EXPERTS), torch.float64), _host(EXPERTS), 8, r"logits must be a float32 torch.Tensor of shape \[1, 256\]"),
    (_host((1, EXPERTS - 1)), _host(EXPERTS), 8, r"logits must be a float32 torch.Tensor of shape \[1, 256\]"),
    (_host((MAX_TOKENS + 1, EXPERTS)), _host(EXPERTS), 8, r"1 <= b <= 8"),
    (_host((0, EXPERTS)), _host(EXPERTS), 8, r"1 <= b <= 8"),
    (_host(EXPERTS), _host(EXPERTS), 8, r"\[b, 256\]"),
    ([[0.0] * EXPERTS], _host(EXPERTS), 8, r"\[b, 256\]"),
])
def test_wrapper_refuses_bad_inputs_in_one_line(logits, bias, tile, match):
    with pytest.raises(ValueError, match=match) as raised:
        fused_peer.peer_buffers(logits, bias, tile)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("tile, match", [(0, "tile_n"), (MAX_TILE + 1, "tile_n"), (6, "power of two"),
                                         (8.0, "tile_n"), (True, "tile_n")])
def test_tile_must_be_a_power_of_two_in_range(tile, match):
    with pytest.raises(ValueError, match=match):
        fused_peer._check_tile(tile)


@pytest.mark.parametrize("scale", [float("nan"), float("inf"), "2.5", True, None])
def test_scale_must_be_a_finite_number(scale):
    with pytest.raises(ValueError, match="scale must be a finite float"):
        fused_peer._check_scale(scale)


def test_enqueue_and_read_back_refuse_anything_but_peer_buffers():
    for call in (lambda: fused_peer.enqueue(object(), 2.5, 0, EXPERTS), lambda: fused_peer.read_back(None)):
        with pytest.raises(ValueError, match="buffers must be a PeerBuffers"):
            call()
