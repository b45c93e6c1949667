"""The H200's own answers: one float32 PTX instruction per Triton kernel, by inline assembly (GPU only).

Each kernel computes one instruction elementwise, on inputs read from memory or made from a range of bit
patterns in the kernel itself (for the sweeps over all 2^32 inputs). Triton cannot contract, reorder or
fold an inline assembly block, so the instruction reaches ptxas as written.
"""

import torch
import triton
import triton.language as tl

UNARY = {
    "ex2_approx_ftz_f32": "ex2.approx.ftz.f32 $0, $1;",
    "ex2_approx_f32": "ex2.approx.f32 $0, $1;",
    "rcp_approx_ftz_f32": "rcp.approx.ftz.f32 $0, $1;",
    "rcp_approx_f32": "rcp.approx.f32 $0, $1;",
    "rsqrt_approx_ftz_f32": "rsqrt.approx.ftz.f32 $0, $1;",
    "rsqrt_approx_f32": "rsqrt.approx.f32 $0, $1;",
    "sqrt_approx_ftz_f32": "sqrt.approx.ftz.f32 $0, $1;",
    "sqrt_approx_f32": "sqrt.approx.f32 $0, $1;",
    "lg2_approx_ftz_f32": "lg2.approx.ftz.f32 $0, $1;",
    "lg2_approx_f32": "lg2.approx.f32 $0, $1;",
    "sin_approx_ftz_f32": "sin.approx.ftz.f32 $0, $1;",
    "sin_approx_f32": "sin.approx.f32 $0, $1;",
    "cos_approx_ftz_f32": "cos.approx.ftz.f32 $0, $1;",
    "cos_approx_f32": "cos.approx.f32 $0, $1;",
    "tanh_approx_f32": "tanh.approx.f32 $0, $1;",
}
# 16-bit instructions: bit patterns in and out through int16 registers.
HALF = {
    "tanh_approx_f16": "tanh.approx.f16 $0, $1;",
    "tanh_approx_bf16": "tanh.approx.bf16 $0, $1;",
    "ex2_approx_f16": "ex2.approx.f16 $0, $1;",
    "ex2_approx_ftz_bf16": "ex2.approx.ftz.bf16 $0, $1;",
}
BINARY = {
    "add_rn": "add.rn.f32 $0, $1, $2;",
    "mul_rn": "mul.rn.f32 $0, $1, $2;",
    "div_full_f32": "div.full.f32 $0, $1, $2;",
}
_BLOCK = 1024


@triton.jit
def _unary_kernel(x_ptr, y_ptr, n, ASM: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.inline_asm_elementwise(ASM, "=f,f", [x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(y_ptr + offs, y, mask=mask)


@triton.jit
def _half_kernel(x_ptr, y_ptr, n, ASM: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.inline_asm_elementwise(ASM, "=h,h", [x], dtype=tl.int16, is_pure=True, pack=1)
    tl.store(y_ptr + offs, y, mask=mask)


@triton.jit
def _binary_kernel(a_ptr, b_ptr, y_ptr, n, ASM: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    y = tl.inline_asm_elementwise(ASM, "=f,f,f", [a, b], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(y_ptr + offs, y, mask=mask)


@triton.jit
def _sigmoid_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.sigmoid(tl.load(x_ptr + offs, mask=mask)), mask=mask)


def _grid(n):
    return (triton.cdiv(n, _BLOCK),)


def unary(name, x):
    """The instruction ``name`` of UNARY (or "sigmoid_f32": Triton's tl.sigmoid) on float32 CUDA tensor x."""
    x = x.contiguous()
    y = torch.empty_like(x)
    if name == "sigmoid_f32":
        _sigmoid_kernel[_grid(x.numel())](x, y, x.numel(), BLOCK=_BLOCK)
    else:
        _unary_kernel[_grid(x.numel())](x, y, x.numel(), ASM=UNARY[name], BLOCK=_BLOCK)
    return y


def half(name, x):
    """The 16-bit instruction ``name`` of HALF on int16 CUDA tensor x of f16 or bf16 bit patterns."""
    x = x.contiguous()
    y = torch.empty_like(x)
    _half_kernel[_grid(x.numel())](x, y, x.numel(), ASM=HALF[name], BLOCK=_BLOCK)
    return y


def binary(name, a, b):
    """The instruction ``name`` of BINARY on float32 CUDA tensors a and b of one shape."""
    a, b = a.contiguous(), b.contiguous()
    y = torch.empty_like(a)
    _binary_kernel[_grid(a.numel())](a, b, y, a.numel(), ASM=BINARY[name], BLOCK=_BLOCK)
    return y


def bit_range(start, count, device="cuda"):
    """float32 CUDA tensor of the bit patterns start .. start + count - 1 (taken modulo 2^32)."""
    v = torch.arange(start, start + count, dtype=torch.int64, device=device) & 0xFFFFFFFF
    return torch.where(v >= 2**31, v - 2**32, v).to(torch.int32).view(torch.float32)

