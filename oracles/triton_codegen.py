"""Compile the Triton oracle for sm_90 ahead of time, without a GPU, exactly as the wrapper launches it.

The wrapper only launches 16-byte aligned pointers and a float32 scale, so the one specialization below is
the kernel that runs; tests/test_triton_routing_gpu.py checks that the launched kernel's float ops match.
"""

import functools

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, make_backend

from oracles.ptx.sass import sass
from oracles.triton_routing import NUM_WARPS, _routing_kernel, kernel_constexprs

SM90 = GPUTarget("cuda", 90, 32)
_SIGNATURE = {"logits_ptr": "*fp32", "bias_ptr": "*fp32", "weights_ptr": "*fp32", "ids_ptr": "*i32",
              "scale": "fp32", "RENORMALIZE": "constexpr", "EXPERTS": "constexpr", "K": "constexpr",
              "EPS": "constexpr"}
_ALIGNED_POINTERS = ("logits_ptr", "bias_ptr", "weights_ptr", "ids_ptr")
# The kernel's parameters in PTX order (constexprs are not parameters), named for what they hold: logits_ptr -> logits.
PARAMS = tuple(name.removesuffix("_ptr") for name, kind in _SIGNATURE.items() if kind != "constexpr")


@functools.lru_cache(maxsize=None)
def compile_kernel(renormalize: bool):
    """The sm_90 build of _routing_kernel for one RENORMALIZE value (Triton's CompiledKernel; no GPU used)."""
    names = list(_SIGNATURE)
    attrs = {(names.index(p),): [["tt.divisibility", 16]] for p in _ALIGNED_POINTERS}
    src = ASTSource(_routing_kernel, dict(_SIGNATURE), constexprs=kernel_constexprs(renormalize), attrs=attrs)
    options = make_backend(SM90).parse_options({"num_warps": NUM_WARPS})
    return triton.compile(src, target=SM90, options=options.__dict__)


def compile_ptx(renormalize: bool) -> str:
    """PTX text Triton 3.6.0 emits for _routing_kernel on sm_90."""
    return compile_kernel(renormalize).asm["ptx"]


def compile_sass(renormalize: bool) -> str:
    """SASS of the sm_90 cubin, disassembled by cuobjdump (oracles/ptx/sass.py)."""
    return sass(compile_kernel(renormalize).asm["cubin"])
