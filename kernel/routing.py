"""Muse Spark decode routing (b <= 8 tokens) in the CuTe DSL, with the TRT-LLM-gen metadata in the same launch.

For FP32 logits [b, 256] and an FP32 bias [256]: s = sigmoid(logits), c = s + bias; ids [b, 8] are the top 8
experts of each row by c (the lowest index among equal values, -0.0 == +0.0), weights [b, 8] their sigmoid
scores, renormalized as s_k * (scale / ((0.0 + s_0 + ... + s_7) + 1e-15)) or scaled as s_k * scale. Every
float operation is the PTX instruction Triton 3.6.0 emits for it (kernel/primitives.py).

With metadata one CTA of 256 threads, warp w < 8 routing token row w; at b = 1, and at b = 2 with tiles of 2 or
more, a CTA of b warps: each picked expert's tokens then fill one CTA, so the warps find every route's row from
the picks themselves (b = 2: one exchange of the 8 picks through shared memory), without route words or atomics.
Without metadata one CTA per SCHEDULERS rows, of SCHEDULERS routing warps and a trigger warp (160 threads), so
that no two routing warps share a scheduler. Lane l holds experts 8l .. 8l+7. The launch uses programmatic
dependent launch: the bias (a weight) is read before ``griddepcontrol.wait``, the logits after. The CTA's first
``griddepcontrol.launch_dependents`` is the one that counts (PTX ISA), so without metadata each CTA's trigger
warp, which writes nothing, lets the next grid launch at once (that grid's own wait still waits for this one to
complete); with metadata every warp writes, and a trigger warp there measured no faster
(properties/results/README.md, the breakdown).
The host contract (argument checks, the cache of checked calls) is kernel/contract.py.
"""

import functools
import threading

import numpy as np
import torch

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64, Uint32, Uint64, const_expr
from cutlass.cute.runtime import make_fake_stream, make_ptr
from cutlass.memory import SmemAllocator

from kernel import contract
from kernel.layout import (
    EXPERTS,
    EXPERTS_PER_LANE,
    MAX_TILE,
    MAX_TOKENS,
    META_CTA_BATCH,
    META_CTA_LIMIT,
    META_EXPANDED_TO_PERMUTED,
    META_NUM_CTAS,
    META_PADDED_TOKENS,
    META_PERMUTED_TO_TOKEN,
    TENSOR_ALIGN,
    TOP_K,
    VECTOR_WORDS,
    WARP,
    metadata_size,
)
from kernel.network import SORT8
from kernel.primitives import (
    Imm,
    add_f32,
    compare_exchange_u64,
    div_full_f32,
    ex2_approx_f32,
    ld_global_v4_f32,
    ld_shared_f32,
    mul_f32,
    st_global_v4_b32,
    st_shared_v4_f32,
    sub_f32,
)

__all__ = [
    "Routing", "sigmoid", "load_lane", "sorted_words", "pick_row", "plain_row", "plain_ctas", "WORD_BYTES",
    "KEY_SHIFT", "THREADS", "WARPS", "BLOCK_THREADS", "route", "prepare", "checked_calls", "compile_routing",
    "compile_variant", "compiled_routing", "compile_artifacts", "KERNELS", "VARIANT_KEYS", "kernel_tokens",
    "ffi_function", "launch_arguments", "cta_table", "scale_f32", "current_device", "current_stream",
]

WARPS = MAX_TOKENS
THREADS = WARPS * WARP
SCHEDULERS = 4  # an SM's warp schedulers: from MAX_TOKENS // 2 + 1 rows, two routing warps of a CTA share one
# Without metadata a CTA routes up to SCHEDULERS rows, a warp each, and one more warp only launches the dependents.
BLOCK_THREADS = SCHEDULERS * WARP + WARP
# Thread e < num_local_experts builds local expert e's metadata.
assert THREADS == EXPERTS

# Float constants as Triton prints them (hardware facts, section 1).
ZERO = Imm(0x00000000)
ONE = Imm(0x3F800000)
LOG2E = Imm(0x3FB8AA3B)
RENORM_EPS = Imm(0x26901D7D)  # float32(1e-15)

# A candidate word: the high 32 bits the order key of c, the low 32 bits the shared address of its sigmoid
# score. Warp w keeps the scores of its row at w * 256 + 8l + (7 - j) for lane l's slot j (reversed inside
# each lane's 8, so that among equal keys the lower slot has the larger word).
KEY_SHIFT = 32
SLOT_MASK = EXPERTS_PER_LANE - 1
SIGN_BIT = 0x80000000
WORD_BYTES = 4
WORD_SHIFT = 2  # log2(WORD_BYTES)
PADDING = -1
# A local expert's shared route word: nibble t for token t, TOKEN_FLAG | k when the token's pick k is it.
NIBBLE = 4
NIBBLE_SHIFT = 2
TOKEN_FLAG = 0x8
TOKEN_FLAGS = 0x88888888
QUARTERS = WARP // TOP_K  # the lanes that share one pick (lane % TOP_K)
CTA_COUNT_BITS = 4  # an expert's CTA count (0..8) as bit planes of a warp's ballots
CTA_NIBBLE = 4  # cta_table's nibble per token count

# ---------------------------------------------------------------------------------------------- device code

def _select(cond, if_true, if_false):
    """``cond ? if_true : if_false`` (one selp), typed like ``if_false``."""
    return type(if_false)(cutlass.select_(cond, if_true, if_false))


def sigmoid(x):
    """Triton's tl.sigmoid: 1 / (1 + 2^((0 - x) * log2 e)), instruction for instruction."""
    t = mul_f32(sub_f32(ZERO, x), LOG2E)
    return div_full_f32(ONE, add_f32(ex2_approx_f32(t), ONE))


def _order_key(c):
    """Unsigned key ordered like the float c, from integer operations only (subnormals keep their order).

    Every key of a non-NaN value, -inf included, is above 0. No -0.0 fix-up: c = s + bias is never -0.0,
    since s >= +0.0 and a round-to-nearest add gives -0.0 only for (-0.0) + (-0.0).
    """
    bits = c.bitcast(Uint32)
    flip = (Uint32(0) - (bits >> 31)) | Uint32(SIGN_BIT)
    return bits ^ flip


def load_lane(address):
    """The 8 floats at a 16-byte aligned address, as two 16-byte loads in program order."""
    return ld_global_v4_f32(address) + ld_global_v4_f32(address + VECTOR_WORDS * WORD_BYTES)


def _store_scores(address, scores):
    """The lane's 8 scores, reversed, at its 16-byte aligned shared ``address``: two 16-byte stores."""
    reversed_scores = scores[::-1]
    st_shared_v4_f32(address, reversed_scores[:VECTOR_WORDS])
    st_shared_v4_f32(address + VECTOR_WORDS * WORD_BYTES, reversed_scores[VECTOR_WORDS:])


def sorted_words(corrected, address):
    """The lane's candidate words, best first: the larger key, then the lower slot (the larger address of
    its score, ``address`` holding slot 7's)."""
    words = [(Uint64(_order_key(c)) << KEY_SHIFT) | Uint64(address + (SLOT_MASK - j) * WORD_BYTES)
             for j, c in enumerate(corrected)]
    for i, j in SORT8:
        words[i], words[j] = compare_exchange_u64(words[i], words[j])
    return words


def _lowest_holder(holders):
    """The lowest lane set in a ballot (bfind of its lowest set bit)."""
    return Int32(cute.arch.bfind(holders & (Uint32(0) - holders)))


@cute.jit
def _top_k(words):
    """TOP_K rounds of the warp-wide argmax over the lanes' head words; every lane gets every pick's score
    address (the low half of the winner's head).

    The rounds are speculative: every lane holding the round's best key pops its head, so no vote stands on
    the rounds' chain of REDUX, compare and select. That is exact while every round's best is held by one
    lane alone; a round whose best two lanes held (a warp-uniform ballot) sends the warp to the exact rounds.
    A lane keeps only the words that can still reach its head in the rounds left, one fewer each round.
    """
    addresses = []
    tied = Uint32(0)
    spec = words
    for k in cutlass.range_constexpr(TOP_K):
        head = spec[0]
        key = Uint32(head >> KEY_SHIFT)
        best = cute.arch.warp_redux_sync(key, "umax")
        held = key == best
        holders = cute.arch.vote_ballot_sync(held)
        tied = tied | (holders & (holders - 1))
        addresses.append(cute.arch.shuffle_sync(Int32(Uint32(head)), _lowest_holder(holders)))
        if const_expr(k < TOP_K - 1):
            spec = [_select(held, nxt, cur) for cur, nxt in zip(spec, spec[1:])]
    if tied != 0:
        addresses = _top_k_exact(words)
    return addresses


def _top_k_exact(words):
    """The exact rounds: the maximum key wins, then the lowest lane holding it (its experts are the lower ones),
    then inside the lane the lowest slot (the word's low half): the lowest expert among equal values. Only the
    winner pops its head; its last word becomes 0, below every key.
    """
    addresses = []
    below = cute.arch.lanemask_lt()
    for k in range(TOP_K):
        head = words[0]
        key = Uint32(head >> KEY_SHIFT)
        best = cute.arch.warp_redux_sync(key, "umax")
        holders = cute.arch.vote_ballot_sync(key == best)
        addresses.append(cute.arch.shuffle_sync(Int32(Uint32(head)), _lowest_holder(holders)))
        if k < TOP_K - 1:
            won = (key == best) & ((holders & below) == 0)
            words = [_select(won, nxt, cur) for cur, nxt in zip(words, words[1:])] + \
                    [_select(won, Uint64(0), words[-1])]
    return addresses


def _weight(addresses, score, scale, renormalize):
    """The weight of a pick with sigmoid ``score``: s * (scale / ((0.0 + s_0 + ... + s_7) + 1e-15)), or
    s * scale; ``addresses`` those of the 8 picks' scores in pick order."""
    if not renormalize:
        return mul_f32(score, scale)
    picked = [ld_shared_f32(a) for a in addresses]
    total = add_f32(ZERO, picked[0])
    for s in picked[1:]:
        total = add_f32(total, s)
    return mul_f32(score, div_full_f32(scale, add_f32(total, RENORM_EPS)))


def _bitmap_words(sUsed):
    """The picked-local-expert bitmap's WARPS words (bit e % 32 of word e // 32 for local expert e)."""
    return [Uint32(sUsed[w]) for w in range(WARPS)]


def _picked_below(used, local):
    """The number of picked local experts below ``local`` (all of them for EXPERTS): each word's popcount
    under its mask, summed as a balanced tree (depth 3, not a chain of 8)."""
    group = local // WARP
    below = (Uint32(1) << (local % WARP)) - 1
    counts = [Int32(cute.arch.popc(word & _select(w < group, Uint32(0xFFFFFFFF),
                                                   _select(w == group, below, Uint32(0)))))
              for w, word in enumerate(used)]
    while len(counts) > 1:
        counts = [a + b for a, b in zip(counts[::2], counts[1::2])]
    return counts[0]


def _by_pick(values, mine):
    """values[mine] for a per-lane pick index, as a chain of selects."""
    out = values[0]
    for k in range(1, TOP_K):
        out = _select(mine == k, values[k], out)
    return out


def pick_row(mLogits, mIds, sScores, bias, row, lane):
    """Pick token ``row``'s top 8 with its warp and write its ids; returns (the expert id of the lane's pick,
    index lane % TOP_K; the 8 picks' score addresses; that of the lane's pick).

    Reads the row's logits (the caller has passed ``griddepcontrol.wait``); lanes l and l + 8k write the
    same pick, so every lane stores and no branch is needed. The scores go through the warp's shared
    region, where a pick's score address finds its score and its expert.
    """
    first = lane * EXPERTS_PER_LANE
    logits = load_lane((mLogits.iterator + cute.crd2idx((row, first), mLogits.layout)).toint())
    scores = [sigmoid(x) for x in logits]
    corrected = [add_f32(s, b) for s, b in zip(scores, bias)]
    region = sScores.iterator.toint() + row * (EXPERTS * WORD_BYTES)
    _store_scores(region + first * WORD_BYTES, scores)
    addresses = _top_k(sorted_words(corrected, region + first * WORD_BYTES))
    # The shuffles synchronise the warp; this orders the other lanes' score stores before any load.
    cute.arch.sync_warp()
    mine = lane % TOP_K
    address = _by_pick(addresses, mine)
    expert = ((address - region) >> WORD_SHIFT) ^ SLOT_MASK
    mIds[row, mine] = expert
    return expert, addresses, address


def _write_weights(mWeights, row, lane, addresses, address, scale, renormalize):
    """Write the weight of the lane's pick (index lane % TOP_K) of token ``row`` from the shared scores."""
    mWeights[row, lane % TOP_K] = _weight(addresses, ld_shared_f32(address), scale, renormalize)


def _route_row(mLogits, mIds, mWeights, sScores, bias, row, lane, scale, renormalize):
    """Route token ``row`` with its warp: ids and weights."""
    _, addresses, address = pick_row(mLogits, mIds, sScores, bias, row, lane)
    _write_weights(mWeights, row, lane, addresses, address, scale, renormalize)


def plain_ctas(rows):
    """Without metadata, the CTAs of a launch: one per SCHEDULERS rows, so no two routing warps share a
    scheduler."""
    return (rows + SCHEDULERS - 1) // SCHEDULERS


def plain_row(warp, rows):
    """Without metadata: (the row warp ``warp`` of this CTA routes, whether it routes one). The bound is on the
    warp index alone, which the compiler sees as warp-uniform (a bound on the row made it guard every warp
    collective against divergence)."""
    cta, _, _ = cute.arch.block_idx()
    return cta * SCHEDULERS + warp, warp < cutlass.min(rows - cta * SCHEDULERS, SCHEDULERS)


def _tensors_at(pLogits, pBias, pIds, pWeights, rows, row_stride):
    """(traced in a launcher) The logits [rows, 256] (row stride a multiple of 4), bias [256], ids and weights
    [rows, 8] at their addresses."""
    return (cute.make_tensor(pLogits, cute.make_layout((rows, EXPERTS),
                                                       stride=(cute.assume(row_stride, divby=VECTOR_WORDS), 1))),
            cute.make_tensor(pBias, cute.make_layout((EXPERTS,), stride=(1,))),
            cute.make_tensor(pIds, cute.make_layout((rows, TOP_K), stride=(TOP_K, 1))),
            cute.make_tensor(pWeights, cute.make_layout((rows, TOP_K), stride=(TOP_K, 1))))


class Routing:
    """One compiled variant: with or without metadata, renormalized or scaled weights; with metadata, for any
    b (``tokens`` 0: a warp per row, shared route words) or for b = ``tokens`` of 1 or 2 (a warp per row, the
    routes found from the picks themselves).

    The kernel's phases, the seam a benchmark may override (properties/bench/breakdown.py times them as stages):
    the launchers (``launch_plain``, ``launch_metadata``: the grid), ``kernel`` (each warp's row: ``plain_row``
    or ``pick_row`` with the module's ``load_lane``, ``sigmoid`` and ``sorted_words``, then the weights and the
    metadata), and the metadata writers ``write_route_metadata``, ``write_one_token_metadata``,
    ``write_two_token_metadata``, ``write_route``, ``write_expert_metadata`` and ``write_padding``."""

    def __init__(self, metadata: bool, renormalize: bool, tokens: int):
        self.metadata = metadata
        self.renormalize = renormalize
        self.tokens = tokens

    @cute.jit
    def launch_plain(self, mLogits: cute.Tensor, mBias: cute.Tensor, mIds: cute.Tensor,
                     mWeights: cute.Tensor, scale: Float32, stream):
        self.kernel(mLogits, mBias, mIds, mWeights, scale, None, None, None, None, None).launch(
            grid=[plain_ctas(mLogits.shape[0]), 1, 1], block=[BLOCK_THREADS, 1, 1], stream=stream, use_pdl=True)

    @cute.jit
    def launch_metadata(self, mLogits: cute.Tensor, mBias: cute.Tensor, mIds: cute.Tensor,
                        mWeights: cute.Tensor, scale: Float32, mMeta: cute.Tensor, local_offset: Int32,
                        num_local: Int32, tile_n: Int32, cta_table: Int32, stream):
        self.kernel(mLogits, mBias, mIds, mWeights, scale, mMeta, local_offset, num_local, tile_n,
                    cta_table).launch(grid=[1, 1, 1], block=[self.tokens * WARP if self.tokens else THREADS, 1, 1],
                                      stream=stream, use_pdl=True)

    # route's launchers: the arguments are the data addresses and the dynamic extents (the row count, the logits
    # row stride, the metadata length) with the stream, so that a call marshals integers only; the tensors they
    # build have the layouts of the fake tensors TVM-FFI used to check (the kernel's PTX is the same).
    @cute.jit
    def launch_plain_at(self, pLogits: cute.Pointer, pBias: cute.Pointer, pIds: cute.Pointer, pWeights: cute.Pointer,
                        rows: Int32, row_stride: Int64, scale: Float32, stream):
        self.launch_plain(*_tensors_at(pLogits, pBias, pIds, pWeights, rows, row_stride), scale, stream)

    @cute.jit
    def launch_metadata_at(self, pLogits: cute.Pointer, pBias: cute.Pointer, pIds: cute.Pointer,
                           pWeights: cute.Pointer, rows: Int32, row_stride: Int64, scale: Float32,
                           pMeta: cute.Pointer, meta_size: Int32, local_offset: Int32, num_local: Int32,
                           tile_n: Int32, cta_table: Int32, stream):
        mMeta = cute.make_tensor(pMeta, cute.make_layout((meta_size,), stride=(1,)))
        self.launch_metadata(*_tensors_at(pLogits, pBias, pIds, pWeights, rows, row_stride), scale, mMeta,
                             local_offset, num_local, tile_n, cta_table, stream)

    @cute.kernel
    def kernel(self, mLogits: cute.Tensor, mBias: cute.Tensor, mIds: cute.Tensor, mWeights: cute.Tensor,
               scale: Float32, mMeta, local_offset, num_local, tile_n, cta_table):
        tid, _, _ = cute.arch.thread_idx()
        warp = tid // WARP
        lane = tid % WARP
        rows = mLogits.shape[0]
        bias_address = mBias.iterator.toint() + Int64(lane * EXPERTS_PER_LANE * WORD_BYTES)
        smem = SmemAllocator()
        sScores = smem.allocate_tensor(Float32, cute.make_layout(WARPS * EXPERTS), byte_alignment=16)
        if const_expr(not self.metadata):
            # Warps past the last row, the trigger warp among them, leave at once: no branch follows the wait.
            row, routes = plain_row(warp, rows)
            if routes:
                bias = load_lane(bias_address)
                cute.arch.griddepcontrol_wait()
                _route_row(mLogits, mIds, mWeights, sScores, bias, row, lane, scale, self.renormalize)
        elif const_expr(self.tokens == 1):
            bias = load_lane(bias_address)
            cute.arch.griddepcontrol_wait()
            expert, addresses, address = pick_row(mLogits, mIds, sScores, bias, 0, lane)
            _write_weights(mWeights, 0, lane, addresses, address, scale, self.renormalize)
            self.write_one_token_metadata(mMeta, lane, expert - local_offset, num_local, tile_n)
        elif const_expr(self.tokens == 2):
            sPicks = smem.allocate_tensor(Int32, cute.make_layout(2 * TOP_K), byte_alignment=16)
            bias = load_lane(bias_address)
            cute.arch.griddepcontrol_wait()
            expert, addresses, address = pick_row(mLogits, mIds, sScores, bias, warp, lane)
            local = expert - local_offset
            if lane < TOP_K:
                sPicks[warp * TOP_K + lane] = local
            cute.arch.sync_threads()
            _write_weights(mWeights, warp, lane, addresses, address, scale, self.renormalize)
            self.write_two_token_metadata(mMeta, sPicks, warp, lane, local, num_local, tile_n)
        else:
            sRoutes = smem.allocate_tensor(Int32, cute.make_layout(EXPERTS), byte_alignment=16)
            sWarpCtas = smem.allocate_tensor(Int32, cute.make_layout(WARPS), byte_alignment=16)
            sUsed = smem.allocate_tensor(Int32, cute.make_layout(WARPS), byte_alignment=16)
            sRoutes[tid] = Int32(0)
            if tid < WARPS:
                sUsed[tid] = Int32(0)
            bias = load_lane(bias_address)
            # Every route word is zero before any is set: a barrier, before the wait.
            cute.arch.sync_threads()
            # Every thread writes global memory, so every thread waits for the preceding grid.
            cute.arch.griddepcontrol_wait()
            addresses = [sScores.iterator.toint()] * TOP_K
            address = sScores.iterator.toint()
            expert = Int32(0)
            if warp < rows:
                expert, addresses, address = pick_row(mLogits, mIds, sScores, bias, warp, lane)
                if lane < TOP_K:
                    local = expert - local_offset
                    if local >= 0 and local < num_local:
                        cute.arch.atomic_or((sRoutes.iterator + local), (TOKEN_FLAG | lane) << (NIBBLE * warp),
                                            scope="cta")
                        cute.arch.atomic_or((sUsed.iterator + local // WARP), Int32(1) << (local % WARP),
                                            scope="cta")
                    else:
                        # A route to another rank's expert: -1 (a local route's thread writes its row).
                        mMeta[META_EXPANDED_TO_PERMUTED + warp * TOP_K + lane] = Int32(PADDING)
            # One barrier, after the route words: up to SCHEDULERS rows (a scheduler each) the routing warps
            # compute their weights after it, so no warp waits at it for their chain of adds; with more rows
            # (two warps to a scheduler) before it, where they overlap the other warp's picks (H200:
            # properties/results/). Every thread takes the same side: rows is the CTA's own.
            if rows <= SCHEDULERS:
                cute.arch.sync_threads()
            if warp < rows:
                _write_weights(mWeights, warp, lane, addresses, address, scale, self.renormalize)
            if rows > SCHEDULERS:
                cute.arch.sync_threads()
            if tile_n >= TOP_K:
                if warp < rows:
                    self.write_route_metadata(mMeta, sRoutes, sUsed, warp, lane, expert - local_offset, num_local,
                                              tile_n)
            else:
                self.write_expert_metadata(mMeta, sRoutes, sWarpCtas, tid, warp, tile_n, cta_table)
        cute.arch.griddepcontrol_launch_dependents()

    @cute.jit
    def write_route_metadata(self, mMeta: cute.Tensor, sRoutes: cute.Tensor, sUsed: cute.Tensor, token: Int32,
                             lane: Int32, local: Int32, num_local: Int32, tile_n: Int32):
        """tile_n >= TOP_K, on every lane of token ``token``'s warp: every picked local expert has one CTA (its at
        most MAX_TOKENS tokens fit a tile), so route (token, lane % TOP_K) to local expert ``local`` finds its row
        alone: the expert's CTA is the number of picked local experts below it (``sUsed``), the row that CTA's
        first plus the number of the expert's tokens before ``token`` (its route word). Token 0's last lane
        writes the totals. No loop over experts or tokens, no barrier."""
        used = _bitmap_words(sUsed)
        if token == 0 and lane == WARP - 1:
            ctas = _picked_below(used, Int32(EXPERTS))
            mMeta[META_PADDED_TOKENS] = ctas * tile_n
            mMeta[META_NUM_CTAS] = ctas
        if local >= 0 and local < num_local:
            tokens = Uint32(sRoutes[local]) & Uint32(TOKEN_FLAGS)
            count = Int32(cute.arch.popc(tokens))
            rank = Int32(cute.arch.popc(tokens & ((Uint32(1) << (NIBBLE * token)) - 1)))
            self.write_route(mMeta, token, lane, local, count, rank, _picked_below(used, local), tile_n)

    @cute.jit
    def write_one_token_metadata(self, mMeta: cute.Tensor, lane: Int32, local: Int32, num_local: Int32,
                                 tile_n: Int32):
        """b = 1, on every lane of the one warp: each picked local expert has the one token, so one CTA of any
        tile; its CTA is the number of picked local experts below it, counted over the picks' shuffles. The
        last lane writes the totals, quarter 0 the -1 of a route to another rank's expert. No shared memory."""
        cta = Int32(0)
        for k in cutlass.range_constexpr(TOP_K):
            other = cute.arch.shuffle_sync(local, k)
            cta = cta + _select((other >= 0) & (other < num_local) & (other < local), Int32(1), Int32(0))
        ctas = Int32(cute.arch.popc(cute.arch.vote_ballot_sync((lane < TOP_K) & (local >= 0) & (local < num_local))))
        if lane == WARP - 1:
            mMeta[META_PADDED_TOKENS] = ctas * tile_n
            mMeta[META_NUM_CTAS] = ctas
        if local >= 0 and local < num_local:
            self.write_route(mMeta, Int32(0), lane, local, Int32(1), Int32(0), cta, tile_n)
        else:
            if lane < TOP_K:
                mMeta[META_EXPANDED_TO_PERMUTED + lane] = Int32(PADDING)

    @cute.jit
    def write_two_token_metadata(self, mMeta: cute.Tensor, sPicks: cute.Tensor, token: Int32, lane: Int32,
                                 local: Int32, num_local: Int32, tile_n: Int32):
        """b = 2 and tile_n >= 2, on every lane of token ``token``'s warp: every picked local expert has one CTA.
        From the other token's 8 picks (``sPicks``) and this token's (shuffles): whether the other token picked
        this route's expert too (its count, and its rank for token 1), and the expert's CTA, the distinct picked
        local experts below it: this token's, and the other token's that this one did not pick (a ballot).
        Token 0's last lane writes the totals, quarter 0 the -1 of a route to another rank's expert."""
        pick = lane % TOP_K
        other = (1 - token) * TOP_K
        others = [sPicks[other + j] for j in range(TOP_K)]
        own = [cute.arch.shuffle_sync(local, j) for j in range(TOP_K)]
        mirrored = sPicks[other + pick]
        duplicate = Int32(0)
        for j in cutlass.range_constexpr(TOP_K):
            duplicate = duplicate | _select(own[j] == mirrored, Int32(1), Int32(0))
        duplicates = Uint32(cute.arch.vote_ballot_sync((lane < TOP_K) & (duplicate != 0)))
        cta = Int32(0)
        shared = Int32(0)
        for j in cutlass.range_constexpr(TOP_K):
            cta = cta + _select((own[j] >= 0) & (own[j] < num_local) & (own[j] < local), Int32(1), Int32(0))
            fresh = ((duplicates >> j) & Uint32(1)) == Uint32(0)
            cta = cta + _select((others[j] >= 0) & (others[j] < num_local) & (others[j] < local) & fresh,
                                Int32(1), Int32(0))
            shared = shared | _select(others[j] == local, Int32(1), Int32(0))
        own_ctas = cute.arch.vote_ballot_sync((lane < TOP_K) & (local >= 0) & (local < num_local))
        other_ctas = cute.arch.vote_ballot_sync((lane < TOP_K) & (mirrored >= 0) & (mirrored < num_local)
                                                & (duplicate == 0))
        if token == 0 and lane == WARP - 1:
            ctas = Int32(cute.arch.popc(own_ctas)) + Int32(cute.arch.popc(other_ctas))
            mMeta[META_PADDED_TOKENS] = ctas * tile_n
            mMeta[META_NUM_CTAS] = ctas
        if local >= 0 and local < num_local:
            self.write_route(mMeta, token, lane, local, 1 + shared, shared * token, cta, tile_n)
        else:
            if lane < TOP_K:
                mMeta[META_EXPANDED_TO_PERMUTED + token * TOP_K + lane] = Int32(PADDING)

    @cute.jit
    def write_route(self, mMeta: cute.Tensor, token: Int32, lane: Int32, local: Int32, count: Int32, rank: Int32,
                    cta: Int32, tile_n: Int32):
        """Route (token, lane % TOP_K) to local expert ``local``, whose ``count`` tokens fill CTA ``cta`` alone,
        ``token`` the rank-th of them. Of the QUARTERS lanes sharing the route, quarter 0 writes its rows; on the
        expert's first token quarter 1 writes the CTA's batch index and row limit and the quarters share its
        padding rows: the first TOP_K as single stores, one per quarter in turn (a tile of 8 to 16 has no
        more), 16-byte stores only past them."""
        pick = lane % TOP_K
        quarter = lane // TOP_K
        first_row = cta * tile_n
        if quarter == 0:
            mMeta[META_PERMUTED_TO_TOKEN + first_row + rank] = token
            mMeta[META_EXPANDED_TO_PERMUTED + token * TOP_K + pick] = first_row + rank
        if rank == 0:
            if quarter == 1:
                mMeta[META_CTA_BATCH + cta] = local
                mMeta[META_CTA_LIMIT + cta] = first_row + count
            padding = first_row + count
            end = first_row + tile_n
            for j in cutlass.range_constexpr(TOP_K // QUARTERS):
                if padding + quarter + j * QUARTERS < end:
                    mMeta[META_PERMUTED_TO_TOKEN + padding + quarter + j * QUARTERS] = Int32(PADDING)
            if padding + TOP_K < end:
                self.write_padding(mMeta, META_PERMUTED_TO_TOKEN + padding + TOP_K, META_PERMUTED_TO_TOKEN + end,
                                   quarter, QUARTERS)

    @cute.jit
    def write_expert_metadata(self, mMeta: cute.Tensor, sRoutes: cute.Tensor, sWarpCtas: cute.Tensor, e: Int32,
                              warp: Int32, tile_n: Int32, cta_table: Int32):
        """tile_n < TOP_K: thread e writes local expert e's CTAs (batch index, row limit), permuted rows and route
        rows; thread 0 the totals. Experts past num_local have no route word, so they count no CTA and write
        nothing. ``cta_table`` holds ceil(c / tile_n) in nibble c - 1 for c = 1..8 (no division here).
        """
        word = sRoutes[e]
        tokens = Uint32(word) & Uint32(TOKEN_FLAGS)
        count = Int32(cute.arch.popc(tokens))
        ctas = _select(count > 0, (cta_table >> ((count - 1) * CTA_NIBBLE)) & 0xF, Int32(0))
        below = cute.arch.lanemask_lt()
        scan = Int32(0)
        earlier = Int32(0)
        total = Int32(0)
        # The warp's exclusive scan and total of the CTA counts from the ballots of their bit planes.
        warp_total = Int32(0)
        for b in cutlass.range_constexpr(CTA_COUNT_BITS):
            plane = cute.arch.vote_ballot_sync((ctas & (1 << b)) != 0)
            scan = scan + (Int32(cute.arch.popc(plane & below)) << b)
            warp_total = warp_total + (Int32(cute.arch.popc(plane)) << b)
        if e % WARP == 0:
            sWarpCtas[warp] = warp_total
        cute.arch.sync_threads()
        for w in cutlass.range_constexpr(WARPS):
            earlier = earlier + _select(w < warp, sWarpCtas[w], Int32(0))
            total = total + sWarpCtas[w]
        if e == 0:
            mMeta[META_PADDED_TOKENS] = total * tile_n
            mMeta[META_NUM_CTAS] = total
        if count > 0:
            # The loops stay rolled (unroll=1): unrolled they made more code per launch and measured slower.
            first = earlier + scan
            first_row = first * tile_n
            for c in cutlass.range(ctas, unroll=1):
                cta = first + c
                mMeta[META_CTA_BATCH + cta] = e
                mMeta[META_CTA_LIMIT + cta] = cutlass.min((cta + 1) * tile_n, first_row + count)
            rest = tokens
            for i in cutlass.range(count, unroll=1):
                flag = Int32(cute.arch.bfind(rest & (Uint32(0) - rest)))
                token = flag >> NIBBLE_SHIFT
                pick = (word >> (flag - (NIBBLE - 1))) & (TOP_K - 1)
                mMeta[META_PERMUTED_TO_TOKEN + first_row + i] = token
                mMeta[META_EXPANDED_TO_PERMUTED + token * TOP_K + pick] = first_row + i
                rest = rest & (rest - 1)
            self.write_padding(mMeta, META_PERMUTED_TO_TOKEN + first_row + count,
                               META_PERMUTED_TO_TOKEN + (first + ctas) * tile_n, 0, 1)

    @cute.jit
    def write_padding(self, mMeta: cute.Tensor, start: Int32, end: Int32, part: Int32, parts: cutlass.Constexpr):
        """Part ``part`` of ``parts`` of -1 into mMeta[start:end]: part 0 the up to 3 single stores to a 16-byte
        boundary, each part every parts-th 16-byte store from its own (a rolled loop), the last part the up to 3
        single stores after them (the single ones predicated, not looped)."""
        body_start = cutlass.min((start + VECTOR_WORDS - 1) & -VECTOR_WORDS, end)
        body_end = cutlass.max(body_start, end & -VECTOR_WORDS)
        for d in cutlass.range_constexpr(VECTOR_WORDS - 1):
            if part == 0 and start + d < body_start:
                mMeta[start + d] = Int32(PADDING)
        base = mMeta.iterator.toint()
        for i in cutlass.range(body_start + part * VECTOR_WORDS, body_end, parts * VECTOR_WORDS, unroll=1):
            st_global_v4_b32(base + Int64(i) * WORD_BYTES, Int32(PADDING))
        for d in cutlass.range_constexpr(VECTOR_WORDS - 1):
            if part == parts - 1 and body_end + d < end:
                mMeta[body_end + d] = Int32(PADDING)


# ---------------------------------------------------------------------------------------------- host side

def _refuse_during_capture():
    """Compiling (and the CUDA library load of a first call) would break a CUDA graph capture."""
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        raise RuntimeError("kernel.routing: a routing variant was compiled or first launched during CUDA graph "
                           "capture; call kernel.routing.prepare() before capturing")


def compile_routing(metadata: bool, renormalize: bool, tokens: int, options: str = ""):
    """``cute.compile`` of one variant with TVM-FFI: symbolic row count, logits row stride a multiple of 4,
    16-byte aligned logits, bias and metadata. Its arguments are ``launch_arguments``' then the stream."""
    return compile_variant(Routing(metadata, renormalize, tokens), options)


def compile_variant(variant, options: str = ""):
    """``compile_routing`` of a ``Routing`` object (or of a subclass: the benchmark's phase breakdown)."""
    _refuse_during_capture()
    args = [make_ptr(Float32, 0, cute.AddressSpace.gmem, assumed_align=TENSOR_ALIGN),
            make_ptr(Float32, 0, cute.AddressSpace.gmem, assumed_align=TENSOR_ALIGN),
            make_ptr(Int32, 0, cute.AddressSpace.gmem, assumed_align=WORD_BYTES),
            make_ptr(Float32, 0, cute.AddressSpace.gmem, assumed_align=WORD_BYTES),
            Int32(1), Int64(EXPERTS), Float32(1.0)]
    if variant.metadata:
        args += [make_ptr(Int32, 0, cute.AddressSpace.gmem, assumed_align=TENSOR_ALIGN),
                 Int32(metadata_size(MAX_TILE)), Int32(0), Int32(EXPERTS), Int32(1), Int32(0)]
        launcher = variant.launch_metadata_at
    else:
        launcher = variant.launch_plain_at
    args.append(make_fake_stream(use_tvm_ffi_env_stream=False))
    return cute.compile(launcher, *args, options=" ".join(["--enable-tvm-ffi", options]).strip())


def ffi_function(compiled):
    """A compiled variant's TVM-FFI function itself: called with its arguments in order, without the DSL's
    Python wrapper (keyword binding, pointer conversion) in front of it."""
    return compiled.__tvm_ffi_object__()


def launch_arguments(logits, bias, ids, weights, scale32, metadata=None, *metadata_scalars):
    """A compiled variant's arguments but the stream, for checked tensors: the addresses, the row count, the
    logits row stride, the float32 scale, with metadata its address, its length and the metadata scalars
    (local_expert_offset, num_local_experts, tile_n, cta_table)."""
    args = (logits.data_ptr(), bias.data_ptr(), ids.data_ptr(), weights.data_ptr(), logits.shape[0],
            logits.stride(0), scale32)
    if metadata is None:
        return args
    return args + (metadata.data_ptr(), metadata.shape[0], *metadata_scalars)


@functools.lru_cache(maxsize=MAX_TILE)
def cta_table(tile_n: int) -> int:
    """ceil(c / tile_n) in nibble c - 1 for c = 1..TOP_K tokens of one expert, as an int32 (the kernel's CTA count
    per expert without a division)."""
    table = sum(-(-c // tile_n) << (CTA_NIBBLE * (c - 1)) for c in range(1, TOP_K + 1))
    return table - (1 << 32) if table >= 1 << 31 else table


def scale_f32(scale):
    """``scale`` as the exact float32 value the model uses, so the FFI's conversion cannot round it."""
    return float(np.float32(scale))


def current_device():
    """The current CUDA device's index: ``torch.cuda.current_device()`` without its Python wrapper (the C call
    initialises CUDA itself where it is not yet)."""
    return torch._C._cuda_getDevice()


def current_stream(device):
    """The raw handle of the current stream of CUDA device ``device`` (the stream route launches on)."""
    return torch._C._cuda_getCurrentRawStream(device)


def compile_artifacts(metadata: bool, renormalize: bool, tokens: int, folder, arch: str = "sm_90a"):
    """(PTX text, cubin bytes) of one variant compiled for ``arch``; needs no GPU. The DSL dumps them into
    ``folder`` (an empty folder of the caller's: parallel processes each pass their own)."""
    folder = str(folder)
    if any(ch.isspace() for ch in folder):
        raise ValueError(f"the DSL's option parser cannot take a dump folder with spaces: {folder!r}")
    fn = compile_routing(metadata, renormalize, tokens,
                         f"--keep-ptx --keep-cubin --dump-dir={folder} --gpu-arch={arch}")
    ptx, cubin = fn.__ptx__, fn.__cubin__
    if not isinstance(ptx, str) or ".entry" not in ptx or not isinstance(cubin, bytes):
        raise RuntimeError("the DSL kept no PTX or cubin")
    return ptx, cubin


# (metadata, tokens) of each kernel route launches: with metadata, tokens 1 and 2 for b = 1 and 2 (kernel_tokens).
KERNELS = ((False, 0), (True, 0), (True, 1), (True, 2))
# (metadata, renormalize, tokens) of every compiled variant.
VARIANT_KEYS = tuple((metadata, renormalize, tokens) for metadata, tokens in KERNELS
                     for renormalize in (False, True))
_compiled = {}
_launched_on = set()
_lock = threading.Lock()


def compiled_routing(metadata: bool, renormalize: bool, tokens: int):
    """The compiled variant's TVM-FFI function (``ffi_function``), compiled once per process."""
    key = (bool(metadata), bool(renormalize), int(tokens))
    with _lock:
        if key not in _compiled:
            _compiled[key] = compile_routing(*key)
        return ffi_function(_compiled[key])


def kernel_tokens(with_metadata: bool, rows: int, tile_n: int) -> int:
    """The ``tokens`` of the kernel ``route`` launches: with metadata, 1 at b = 1, and 2 at b = 2 with a tile of
    2 or more (each picked expert's tokens then fill one CTA); else 0, the kernel for any b."""
    return rows if with_metadata and (rows == 1 or (rows == 2 and tile_n >= 2)) else 0


def prepare(renormalize: bool = True):
    """Compile the variants ``route`` uses (KERNELS) and, where a CUDA device is present, launch each once on
    the current device, so that a later CUDA graph capture compiles and loads nothing."""
    for metadata, tokens in KERNELS:
        compiled_routing(metadata, renormalize, tokens)
    if torch.cuda.is_available():
        device = torch.device("cuda", torch.cuda.current_device())
        bias = torch.zeros(EXPERTS, dtype=torch.float32, device=device)
        for rows, tile_n in ((1, 1), (2, 1), (2, TOP_K)):
            logits = torch.zeros((rows, EXPERTS), dtype=torch.float32, device=device)
            ids = torch.empty((rows, TOP_K), dtype=torch.int32, device=device)
            weights = torch.empty((rows, TOP_K), dtype=torch.float32, device=device)
            metadata = torch.empty(metadata_size(tile_n), dtype=torch.int32, device=device)
            route(logits, bias, ids, weights, 1.0, renormalize)
            route(logits, bias, ids, weights, 1.0, renormalize, metadata, 0, EXPERTS, tile_n)
        torch.cuda.synchronize(device)


checked_calls = contract.CheckedCalls()


def route(logits, bias, ids, weights, scale, renormalize=True, metadata=None, local_expert_offset=0,
          num_local_experts=0, tile_n=0) -> None:
    """Write the top-8 ids [b, 8] and weights [b, 8] of FP32 logits [b, 256] with bias [256], and with
    ``metadata`` the routing metadata of local experts [local_expert_offset, +num_local_experts) for GEMM
    tile ``tile_n``; on the current stream of the logits' device. Raises ValueError, naming the argument,
    on anything outside the contract before anything is written. Allocates nothing; graph-capturable once
    ``prepare`` has run. A call whose signature passed before (kernel/contract.py) skips the checks."""
    key = contract.signature(logits, bias, ids, weights, scale, renormalize, metadata, local_expert_offset,
                             num_local_experts, tile_n)
    call = checked_calls.get(key)
    if call is not None:
        _launch(*call)
        return
    contract.check_arguments(logits, bias, ids, weights, scale, renormalize, metadata, local_expert_offset,
                             num_local_experts, tile_n)
    with_metadata = metadata is not None
    tokens = kernel_tokens(with_metadata, logits.shape[0], int(tile_n))
    if (with_metadata, renormalize, tokens, logits.device.index) not in _launched_on:
        _refuse_during_capture()
    # No tensor in the cache (it would keep the caller's buffers alive): the launch arguments are addresses,
    # extents and scalars, each read from what the key holds, so an entry launches only the calls it matches.
    metadata_scalars = (int(local_expert_offset), int(num_local_experts), int(tile_n),
                        cta_table(int(tile_n))) if with_metadata else ()
    call = (compiled_routing(with_metadata, renormalize, tokens),
            launch_arguments(logits, bias, ids, weights, scale_f32(scale), metadata, *metadata_scalars),
            logits.device.index)
    _launch(*call)
    _launched_on.add((with_metadata, renormalize, tokens, logits.device.index))
    checked_calls.add(key, call)


def _launch(fn, args, device):
    """Launch a checked call: the compiled variant with its launch arguments and the current stream of the
    logits' device, from that device (the launch goes to the current device's context)."""
    if device == current_device():
        fn(*args, current_stream(device))
    else:
        with torch.cuda.device(device):
            fn(*args, current_stream(device))
