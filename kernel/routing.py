"""Muse Spark decode routing (b <= 8 tokens) in the CuTe DSL, with the TRT-LLM-gen metadata in the same launch.

For FP32 logits [b, 256] and an FP32 bias [256]: s = sigmoid(logits), c = s + bias; ids [b, 8] are the top 8
experts of each row by c (the lowest index among equal values, -0.0 == +0.0), weights [b, 8] their sigmoid
scores, renormalized as s_k * (scale / ((0.0 + s_0 + ... + s_7) + 1e-15)) or scaled as s_k * scale. Every
float operation is the PTX instruction Triton 3.6.0 emits for it (kernel/primitives.py).

One CTA of 256 threads; warp w routes token row w, lane l holds experts 8l .. 8l+7. The launch uses
programmatic dependent launch: the bias (a weight) is read before ``griddepcontrol.wait``, the logits after.
"""

import numbers
import tempfile
import threading
from pathlib import Path

import numpy as np
import torch

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64, Uint32, Uint64, const_expr
from cutlass.cute.runtime import make_fake_stream, make_fake_tensor
from cutlass.memory import SmemAllocator

from kernel.layout import (
    EXPERTS,
    MAX_CTAS,
    MAX_TILE,
    MAX_TOKENS,
    META_CTA_BATCH,
    META_CTA_LIMIT,
    META_EXPANDED_TO_PERMUTED,
    META_NUM_CTAS,
    META_PADDED_TOKENS,
    META_PERMUTED_TO_TOKEN,
    ROUTES,
    TOP_K,
    metadata_size,
)
from kernel.network import SORT8
from kernel.primitives import (
    Imm,
    add_f32,
    div_full_f32,
    ex2_approx_f32,
    ld_global_v4_f32,
    mul_f32,
    st_global_v4_b32,
    sub_f32,
)

__all__ = [
    "EXPERTS", "TOP_K", "MAX_TOKENS", "WARP", "THREADS", "WARPS", "EXPERTS_PER_LANE", "ROUTES", "MAX_TILE",
    "MAX_CTAS", "META_PADDED_TOKENS", "META_NUM_CTAS", "META_EXPANDED_TO_PERMUTED", "META_CTA_BATCH",
    "META_CTA_LIMIT", "META_PERMUTED_TO_TOKEN", "metadata_size", "route", "compile_routing", "compiled_routing",
    "prepare", "compile_artifacts",
]

WARP = 32
WARPS = MAX_TOKENS
THREADS = WARPS * WARP
EXPERTS_PER_LANE = EXPERTS // WARP
# Thread e < num_local_experts builds local expert e's metadata.
assert THREADS == EXPERTS

# Float constants as Triton prints them (hardware facts, section 1).
ZERO = Imm(0x00000000)
ONE = Imm(0x3F800000)
LOG2E = Imm(0x3FB8AA3B)
RENORM_EPS = Imm(0x26901D7D)  # float32(1e-15)

# A candidate word: bits 3..34 the order key of c, bits 0..2 (7 - j) for the lane's slot j.
SLOT_BITS = 3
SLOT_MASK = EXPERTS_PER_LANE - 1
SIGN_BIT = 0x80000000
WORD_BYTES = 4
VECTOR_WORDS = 4  # one 16-byte access
PADDING = -1

_TENSOR_ALIGN = 16


# ---------------------------------------------------------------------------------------------- device code

def _select(cond, if_true, if_false):
    """``cond ? if_true : if_false`` (one selp), typed like ``if_false``."""
    return type(if_false)(cutlass.select_(cond, if_true, if_false))


def _sigmoid(x):
    """Triton's tl.sigmoid: 1 / (1 + 2^((0 - x) * log2 e)), instruction for instruction."""
    t = mul_f32(sub_f32(ZERO, x), LOG2E)
    return div_full_f32(ONE, add_f32(ex2_approx_f32(t), ONE))


def _order_key(c):
    """Unsigned key ordered like the float c, from integer operations only (subnormals keep their order).

    -0.0 takes +0.0's key; every key of a non-NaN value, -inf included, is above 0.
    """
    bits = c.bitcast(Uint32)
    bits = _select(bits == Uint32(SIGN_BIT), Uint32(0), bits)
    flip = (Uint32(0) - (bits >> 31)) | Uint32(SIGN_BIT)
    return bits ^ flip


def _load_lane(address):
    """The 8 floats at a 16-byte aligned address, as two 16-byte loads in program order."""
    return ld_global_v4_f32(address) + ld_global_v4_f32(address + VECTOR_WORDS * WORD_BYTES)


def _sorted_words(corrected):
    """The lane's candidate words, best first: the larger key, then the lower slot."""
    words = [(Uint64(_order_key(c)) << SLOT_BITS) | Uint64(SLOT_MASK - j) for j, c in enumerate(corrected)]
    for i, j in SORT8:
        words[i], words[j] = cutlass.max(words[i], words[j]), cutlass.min(words[i], words[j])
    return words


def _by_slot(values, code):
    """values[SLOT_MASK - code] for a per-lane slot code, as a chain of selects (registers, no local memory)."""
    out = values[SLOT_MASK]
    for j in range(SLOT_MASK):
        out = _select(code == SLOT_MASK - j, values[j], out)
    return out


def _top_k(words, scores, lane):
    """TOP_K rounds of the warp-wide argmax over the lanes' head words; every lane gets every pick.

    The maximum key wins, then the lowest lane holding it (its experts are the lower ones), then inside
    the lane the lowest slot (the word's low bits): the lowest expert among equal values. Only the winner
    pops its head; its last word becomes 0, below every key.
    """
    picks = []
    for k in range(TOP_K):
        head = words[0]
        key = Uint32(head >> SLOT_BITS)
        best = cute.arch.warp_redux_sync(key, "umax")
        holders = cute.arch.vote_ballot_sync(key == best)
        winner = Int32(cute.arch.clz(cute.arch.brev(holders)))
        code = Int32(Uint32(head) & Uint32(SLOT_MASK))
        expert = cute.arch.shuffle_sync(lane * EXPERTS_PER_LANE + (SLOT_MASK - code), winner)
        score = cute.arch.shuffle_sync(_by_slot(scores, code), winner)
        picks.append((expert, score))
        if k < TOP_K - 1:
            won = lane == winner
            words = [_select(won, nxt, cur) for cur, nxt in zip(words, words[1:])] + \
                    [_select(won, Uint64(0), words[-1])]
    return picks


def _weight(picks, mine, scale, renormalize):
    """The weight of pick ``mine``: s * (scale / ((0.0 + s_0 + ... + s_7) + 1e-15)), or s * scale."""
    score = _by_pick([s for _, s in picks], mine)
    if not renormalize:
        return mul_f32(score, scale)
    total = add_f32(ZERO, picks[0][1])
    for _, s in picks[1:]:
        total = add_f32(total, s)
    return mul_f32(score, div_full_f32(scale, add_f32(total, RENORM_EPS)))


def _by_pick(values, mine):
    """values[mine] for a per-lane pick index, as a chain of selects."""
    out = values[0]
    for k in range(1, TOP_K):
        out = _select(mine == k, values[k], out)
    return out


def _route_row(mLogits, mIds, mWeights, bias, row, lane, scale, renormalize):
    """Route token ``row`` with its warp; returns the lane's pick (its index lane % TOP_K) expert id.

    Reads the row's logits (the caller has passed ``griddepcontrol.wait``) and writes ids and weights;
    lanes l and l + 8k write the same pick, so every lane stores and no branch is needed.
    """
    first = lane * EXPERTS_PER_LANE
    logits = _load_lane((mLogits.iterator + cute.crd2idx((row, first), mLogits.layout)).toint())
    scores = [_sigmoid(x) for x in logits]
    corrected = [add_f32(s, b) for s, b in zip(scores, bias)]
    picks = _top_k(_sorted_words(corrected), scores, lane)
    mine = lane % TOP_K
    expert = _by_pick([e for e, _ in picks], mine)
    mIds[row, mine] = expert
    mWeights[row, mine] = _weight(picks, mine, scale, renormalize)
    return expert


def _lowest_bit(mask):
    """Index of the lowest set bit of a nonzero Int32 (brev, then clz)."""
    return Int32(cute.arch.clz(cute.arch.brev(mask)))


class _Routing:
    """One compiled variant: with or without metadata, renormalized or scaled weights."""

    def __init__(self, metadata: bool, renormalize: bool):
        self.metadata = metadata
        self.renormalize = renormalize

    @cute.jit
    def launch_plain(self, mLogits: cute.Tensor, mBias: cute.Tensor, mIds: cute.Tensor,
                     mWeights: cute.Tensor, scale: Float32, stream):
        self.kernel(mLogits, mBias, mIds, mWeights, scale, None, None, None, None).launch(
            grid=[1, 1, 1], block=[THREADS, 1, 1], stream=stream, use_pdl=True)

    @cute.jit
    def launch_metadata(self, mLogits: cute.Tensor, mBias: cute.Tensor, mIds: cute.Tensor,
                        mWeights: cute.Tensor, scale: Float32, mMeta: cute.Tensor, local_offset: Int32,
                        num_local: Int32, tile_n: Int32, stream):
        self.kernel(mLogits, mBias, mIds, mWeights, scale, mMeta, local_offset, num_local, tile_n).launch(
            grid=[1, 1, 1], block=[THREADS, 1, 1], stream=stream, use_pdl=True)

    @cute.kernel
    def kernel(self, mLogits: cute.Tensor, mBias: cute.Tensor, mIds: cute.Tensor, mWeights: cute.Tensor,
               scale: Float32, mMeta, local_offset, num_local, tile_n):
        tid, _, _ = cute.arch.thread_idx()
        warp = tid // WARP
        lane = tid % WARP
        rows = mLogits.shape[0]
        bias_address = mBias.iterator.toint() + Int64(lane * EXPERTS_PER_LANE * WORD_BYTES)
        if const_expr(not self.metadata):
            # Warps past the last row leave at once: no branch follows the wait.
            if warp < rows:
                bias = _load_lane(bias_address)
                cute.arch.griddepcontrol_wait()
                _route_row(mLogits, mIds, mWeights, bias, warp, lane, scale, self.renormalize)
        else:
            smem = SmemAllocator()
            sMask = smem.allocate_tensor(Int32, cute.make_layout(EXPERTS), byte_alignment=16)
            sFirst = smem.allocate_tensor(Int32, cute.make_layout(EXPERTS), byte_alignment=16)
            sWarpCtas = smem.allocate_tensor(Int32, cute.make_layout(WARPS), byte_alignment=16)
            sRoutes = smem.allocate_tensor(Int32, cute.make_layout(ROUTES), byte_alignment=16)
            sMask[tid] = Int32(0)
            bias = _load_lane(bias_address)
            # Every thread writes global memory, so every thread waits for the preceding grid.
            cute.arch.griddepcontrol_wait()
            cute.arch.sync_threads()
            if warp < rows:
                expert = _route_row(mLogits, mIds, mWeights, bias, warp, lane, scale, self.renormalize)
                if lane < TOP_K:
                    sRoutes[warp * TOP_K + lane] = expert
                    local = expert - local_offset
                    if local >= 0 and local < num_local:
                        cute.arch.atomic_or((sMask.iterator + local), Int32(1) << warp, scope="cta")
            cute.arch.sync_threads()
            self.write_expert_metadata(mMeta, sMask, sFirst, sWarpCtas, tid, warp, lane, tile_n)
            cute.arch.sync_threads()
            if tid < rows * TOP_K:
                self.write_route_row(mMeta, sMask, sFirst, sRoutes, tid, local_offset, num_local, tile_n)
        cute.arch.griddepcontrol_launch_dependents()

    @cute.jit
    def write_expert_metadata(self, mMeta: cute.Tensor, sMask: cute.Tensor, sFirst: cute.Tensor,
                              sWarpCtas: cute.Tensor, e: Int32, warp: Int32, lane: Int32, tile_n: Int32):
        """Thread e: local expert e's CTAs (batch index, row limit) and permuted rows; thread 0 the totals.

        Experts past num_local have an empty mask, so they count no CTA and write nothing.
        """
        tokens = sMask[e]
        count = cute.arch.popc(tokens)
        ctas = (count + tile_n - 1) // tile_n
        # Inclusive warp scan of the CTA counts (shuffle-up), then the per-warp totals through shared memory.
        scan = ctas
        for step in cutlass.range_constexpr(WARP.bit_length() - 1):
            below = cute.arch.shuffle_sync_up(scan, 1 << step)
            scan = scan + _select(lane >= (1 << step), below, Int32(0))
        if lane == WARP - 1:
            sWarpCtas[warp] = scan
        cute.arch.sync_threads()
        earlier = Int32(0)
        total = Int32(0)
        for w in cutlass.range_constexpr(WARPS):
            earlier = earlier + _select(w < warp, sWarpCtas[w], Int32(0))
            total = total + sWarpCtas[w]
        first = earlier + scan - ctas
        sFirst[e] = first
        if e == 0:
            mMeta[META_PADDED_TOKENS] = total * tile_n
            mMeta[META_NUM_CTAS] = total
        first_row = first * tile_n
        for c in cutlass.range(ctas):
            cta = first + c
            mMeta[META_CTA_BATCH + cta] = e
            mMeta[META_CTA_LIMIT + cta] = cutlass.min((cta + 1) * tile_n, first_row + count)
        rest = tokens
        for i in cutlass.range(count):
            mMeta[META_PERMUTED_TO_TOKEN + first_row + i] = _lowest_bit(rest)
            rest = rest & (rest - 1)
        self.write_padding(mMeta, META_PERMUTED_TO_TOKEN + first_row + count,
                           META_PERMUTED_TO_TOKEN + (first + ctas) * tile_n)

    @cute.jit
    def write_padding(self, mMeta: cute.Tensor, start: Int32, end: Int32):
        """-1 into mMeta[start:end]: single stores up to a 16-byte boundary, 16-byte stores, single stores."""
        body_start = cutlass.min((start + VECTOR_WORDS - 1) & -VECTOR_WORDS, end)
        body_end = cutlass.max(body_start, end & -VECTOR_WORDS)
        for i in cutlass.range(start, body_start):
            mMeta[i] = Int32(PADDING)
        base = mMeta.iterator.toint()
        for i in cutlass.range(body_start, body_end, VECTOR_WORDS):
            st_global_v4_b32(base + Int64(i) * WORD_BYTES, Int32(PADDING))
        for i in cutlass.range(body_end, end):
            mMeta[i] = Int32(PADDING)

    @cute.jit
    def write_route_row(self, mMeta: cute.Tensor, sMask: cute.Tensor, sFirst: cute.Tensor,
                        sRoutes: cute.Tensor, r: Int32, local_offset: Int32, num_local: Int32, tile_n: Int32):
        """Thread r: route r's permuted row (its expert's first row + its token's rank there), or -1."""
        local = sRoutes[r] - local_offset
        row = Int32(PADDING)
        if local >= 0 and local < num_local:
            earlier_tokens = sMask[local] & ((Int32(1) << (r // TOP_K)) - 1)
            row = sFirst[local] * tile_n + cute.arch.popc(earlier_tokens)
        mMeta[META_EXPANDED_TO_PERMUTED + r] = row


# ---------------------------------------------------------------------------------------------- host side

def _refuse_during_capture():
    """Compiling (and the CUDA library load of a first call) would break a CUDA graph capture."""
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        raise RuntimeError("kernel.routing: a routing variant was compiled or first launched during CUDA graph "
                           "capture; call kernel.routing.prepare() before capturing")


def compile_routing(metadata: bool, renormalize: bool, options: str = ""):
    """``cute.compile`` of one variant with TVM-FFI: symbolic row count, logits row stride a multiple of 4,
    16-byte aligned logits, bias and metadata. Its arguments are the torch tensors (and numbers) of
    ``route``; it runs on the current stream of the logits' device."""
    _refuse_during_capture()
    rows = cute.sym_int()
    args = [
        make_fake_tensor(Float32, (rows, EXPERTS), stride=(cute.sym_int64(divisibility=VECTOR_WORDS), 1),
                         assumed_align=_TENSOR_ALIGN),
        make_fake_tensor(Float32, (EXPERTS,), stride=(1,), assumed_align=_TENSOR_ALIGN),
        make_fake_tensor(Int32, (rows, TOP_K), stride=(TOP_K, 1), assumed_align=WORD_BYTES),
        make_fake_tensor(Float32, (rows, TOP_K), stride=(TOP_K, 1), assumed_align=WORD_BYTES),
        Float32(1.0),
    ]
    variant = _Routing(metadata, renormalize)
    if metadata:
        args += [make_fake_tensor(Int32, (cute.sym_int(),), stride=(1,), assumed_align=_TENSOR_ALIGN),
                 Int32(0), Int32(EXPERTS), Int32(1)]
        launcher = variant.launch_metadata
    else:
        launcher = variant.launch_plain
    args.append(make_fake_stream(use_tvm_ffi_env_stream=True))
    return cute.compile(launcher, *args, options=" ".join(["--enable-tvm-ffi", options]).strip())


def compile_artifacts(metadata: bool, renormalize: bool, arch: str = "sm_90a"):
    """(PTX text, cubin bytes) of one variant compiled for ``arch``; needs no GPU. Each call dumps into a
    fresh folder under build/, so parallel test processes never read each other's files."""
    root = Path(__file__).resolve().parents[1] / "build"
    root.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="routing-artifacts-", dir=root) as folder:
        if any(ch.isspace() for ch in folder):
            raise RuntimeError(f"the DSL's option parser cannot take a dump folder with spaces: {folder!r}")
        fn = compile_routing(metadata, renormalize,
                             f"--keep-ptx --keep-cubin --dump-dir={folder} --gpu-arch={arch}")
        ptx, cubin = fn.__ptx__, fn.__cubin__
    if not isinstance(ptx, str) or ".entry" not in ptx or not isinstance(cubin, bytes):
        raise RuntimeError("the DSL kept no PTX or cubin")
    return ptx, cubin


_compiled = {}
_launched_on = set()
_lock = threading.Lock()


def compiled_routing(metadata: bool, renormalize: bool):
    """The compiled variant, compiled once per process."""
    key = (bool(metadata), bool(renormalize))
    with _lock:
        if key not in _compiled:
            _compiled[key] = compile_routing(*key)
        return _compiled[key]


def prepare(renormalize: bool = True):
    """Compile the variants ``route`` uses (with and without metadata) and, where a CUDA device is present,
    launch each once on the current device, so that a later CUDA graph capture compiles and loads nothing."""
    for metadata in (False, True):
        compiled_routing(metadata, renormalize)
    if torch.cuda.is_available():
        device = torch.device("cuda", torch.cuda.current_device())
        logits = torch.zeros((1, EXPERTS), dtype=torch.float32, device=device)
        bias = torch.zeros(EXPERTS, dtype=torch.float32, device=device)
        ids = torch.empty((1, TOP_K), dtype=torch.int32, device=device)
        weights = torch.empty((1, TOP_K), dtype=torch.float32, device=device)
        metadata = torch.empty(metadata_size(1), dtype=torch.int32, device=device)
        route(logits, bias, ids, weights, 1.0, renormalize)
        route(logits, bias, ids, weights, 1.0, renormalize, metadata, 0, EXPERTS, 1)
        torch.cuda.synchronize(device)


def _scale_f32(scale):
    """``scale`` as the exact float32 value the model uses, so the FFI's conversion cannot round it."""
    return float(np.float32(scale))


def _fail(name, message):
    raise ValueError(f"route: {name} {message}")


def _check_tensor(name, t, dtype, shape):
    if not isinstance(t, torch.Tensor):
        _fail(name, f"must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        _fail(name, f"must have dtype {dtype}, got {t.dtype}")
    if tuple(t.shape) != shape:
        _fail(name, f"must have shape {list(shape)}, got {list(t.shape)}")


def _check_aligned(name, t, align):
    if t.data_ptr() % align:
        _fail(name, f"must be {align}-byte aligned, got address {t.data_ptr():#x}")


def _check_contiguous(name, t, align):
    if not t.is_contiguous():
        _fail(name, f"must be contiguous, got strides {t.stride()}")
    _check_aligned(name, t, align)


def _span(t):
    """The byte range [start, end) a strided tensor touches."""
    start = t.data_ptr()
    last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return start, start + (last + 1) * t.element_size()


def _check_no_overlap(outputs, inputs):
    """No output may overlap another output or an input on the same device."""
    tensors = {**outputs, **inputs}
    names = list(outputs)
    for i, name in enumerate(names):
        for other in names[i + 1:] + list(inputs):
            (a0, a1), (b0, b1) = _span(tensors[name]), _span(tensors[other])
            if tensors[name].device == tensors[other].device and a0 < b1 and b0 < a1:
                _fail(name, f"must not alias {other}")


def _check_int(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= value <= high:
        _fail(name, f"must be an int in [{low}, {high}], got {value!r}")


def _check_scale(scale):
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        _fail("scale", f"must be a real number, got {scale!r}")
    with np.errstate(over="ignore"):
        if not np.isfinite(np.float32(scale)):
            _fail("scale", f"must be finite in float32, got {scale!r}")


def _check_devices(tensors):
    """Every tensor on the logits' CUDA device (the first of ``tensors``)."""
    device = tensors["logits"].device
    if device.type != "cuda":
        _fail("logits", f"must be on a CUDA device, got {device}")
    for name, t in tensors.items():
        if t.device != device:
            _fail(name, f"must be on the logits' device {device}, got {t.device}")


def _check_metadata(metadata, local_expert_offset, num_local_experts, tile_n):
    if metadata is None:
        for name, value in (("local_expert_offset", local_expert_offset),
                            ("num_local_experts", num_local_experts), ("tile_n", tile_n)):
            if isinstance(value, bool) or value != 0:
                _fail(name, f"is only meaningful with metadata; must be 0 without it, got {value!r}")
        return
    _check_int("tile_n", tile_n, 1, MAX_TILE)
    _check_int("local_expert_offset", local_expert_offset, 0, EXPERTS)
    _check_int("num_local_experts", num_local_experts, 0, EXPERTS - local_expert_offset)
    if not isinstance(metadata, torch.Tensor) or metadata.dim() != 1:
        _fail("metadata", "must be a 1-D torch.Tensor")
    _check_tensor("metadata", metadata, torch.int32, tuple(metadata.shape))
    _check_contiguous("metadata", metadata, _TENSOR_ALIGN)
    if metadata.numel() < metadata_size(tile_n):
        _fail("metadata", f"must hold at least metadata_size({tile_n}) = {metadata_size(tile_n)} elements, "
                          f"got {metadata.numel()}")


def _check_arguments(logits, bias, ids, weights, scale, renormalize, metadata, local_expert_offset,
                     num_local_experts, tile_n):
    """Raise ValueError naming the first argument outside route's contract (devices are checked last)."""
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2:
        _fail("logits", f"must be a 2-D torch.Tensor [b, {EXPERTS}]")
    b = logits.shape[0]
    if not 1 <= b <= MAX_TOKENS:
        _fail("logits", f"must have 1 to {MAX_TOKENS} rows, got {b}")
    _check_tensor("logits", logits, torch.float32, (b, EXPERTS))
    if logits.stride(1) != 1 or logits.stride(0) % VECTOR_WORDS:
        _fail("logits", f"must have unit column stride and a row stride that is a multiple of {VECTOR_WORDS} "
                        f"(16-byte rows), got strides {logits.stride()}")
    _check_aligned("logits", logits, _TENSOR_ALIGN)
    _check_tensor("bias", bias, torch.float32, (EXPERTS,))
    _check_contiguous("bias", bias, _TENSOR_ALIGN)
    _check_tensor("ids", ids, torch.int32, (b, TOP_K))
    _check_contiguous("ids", ids, ids.element_size())
    _check_tensor("weights", weights, torch.float32, (b, TOP_K))
    _check_contiguous("weights", weights, weights.element_size())
    _check_scale(scale)
    if not isinstance(renormalize, bool):
        _fail("renormalize", f"must be a bool, got {renormalize!r}")
    _check_metadata(metadata, local_expert_offset, num_local_experts, tile_n)
    outputs = {"ids": ids, "weights": weights} if metadata is None else \
        {"metadata": metadata, "ids": ids, "weights": weights}
    inputs = {"logits": logits, "bias": bias}
    _check_no_overlap(outputs, inputs)
    _check_devices({**inputs, **outputs})


def route(logits, bias, ids, weights, scale, renormalize=True, metadata=None, local_expert_offset=0,
          num_local_experts=0, tile_n=0) -> None:
    """Write the top-8 ids [b, 8] and weights [b, 8] of FP32 logits [b, 256] with bias [256], and with
    ``metadata`` the routing metadata of local experts [local_expert_offset, +num_local_experts) for GEMM
    tile ``tile_n``; on the current stream of the logits' device. Raises ValueError, naming the argument,
    on anything outside the contract before anything is written. Allocates nothing; graph-capturable once
    ``prepare`` has run."""
    _check_arguments(logits, bias, ids, weights, scale, renormalize, metadata, local_expert_offset,
                     num_local_experts, tile_n)
    with_metadata = metadata is not None
    key = (with_metadata, renormalize, logits.device.index)
    if key not in _launched_on:
        _refuse_during_capture()
    fn = compiled_routing(with_metadata, renormalize)
    # The launch goes to the current device's context; the stream is that of the logits' device.
    with torch.cuda.device(logits.device):
        if with_metadata:
            fn(logits, bias, ids, weights, _scale_f32(scale), metadata, int(local_expert_offset),
               int(num_local_experts), int(tile_n))
        else:
            fn(logits, bias, ids, weights, _scale_f32(scale))
    _launched_on.add(key)
