"""The mutant catalog: edits of the real kernel's source in known-wrong ways that `make verify`'s checks must
catch, and the making of an edited copy. It holds what the generated mutants' operators (generate.py) cannot
express: a reordered or re-associated float expression, an operand taken from another value, a statement
moved or dropped, a clause changed in meaning; an edit some operator makes at a site is the generated set's.

A mutant is a list of exact source edits (old text -> new text) to kernel/routing.py or kernel/primitives.py
(the kernel's mutants, probed by the kernel's tiers) or to kernel/contract.py alone (the contract's, probed by
the contract's tiers).
Nothing is kept as a copy of the kernel: each mutant is made at run time by copying the ``kernel`` package
into a fresh folder and applying its edits (an edit whose old text does not occur exactly once stops the run:
a refactor of the kernel must not silently disarm a mutant). A mutant declares the tiers expected to kill it
(properties/mutants/probe.py: "static" runs the codegen checks on any CPU, "differential" routes the
adversarial rows on the GPU; "contract-cpu" and "contract-gpu" run the contract property of
properties/contract/ with CPU and with CUDA tensors); every declared tier must kill it. A mutant that no
output can show (an fma with a -0.0 addend, sigmoid's constant folded) is declared static only; a contract
mutant one of whose tiers cannot reach its clause says why (``escapes``).

EQUIVALENT lists edits that look like bugs but cannot change the kernel, each with the reason; they are not
run and not counted, but their edits must still apply.
"""

import shutil
from dataclasses import dataclass

from common.provenance import REPO_ROOT

KERNEL_DIR = REPO_ROOT / "kernel"
TARGETS = ("routing.py", "primitives.py", "contract.py")
STATIC, DIFFERENTIAL = "static", "differential"
CONTRACT_CPU, CONTRACT_GPU = "contract-cpu", "contract-gpu"
KERNEL_TIERS, CONTRACT_TIERS = (STATIC, DIFFERENTIAL), (CONTRACT_CPU, CONTRACT_GPU)
TIERS = KERNEL_TIERS + CONTRACT_TIERS
CPU_TIERS = (STATIC, CONTRACT_CPU)  # the tiers any machine runs


class MutantEditError(RuntimeError):
    """A mutant's edit does not apply exactly once to the current kernel source."""


@dataclass(frozen=True)
class Edit:
    """Replace ``old`` (which must occur exactly once) by ``new`` in kernel/<target>."""

    target: str
    old: str
    new: str


@dataclass(frozen=True)
class Mutant:
    name: str
    description: str
    edits: tuple
    kills: frozenset  # the tiers expected to kill it
    reason: str = ""  # for EQUIVALENT entries: why no check can tell it from the kernel
    same_ptx: bool = False  # for EQUIVALENT entries: it compiles to the real kernel's PTX
    escapes: str = ""  # why a tier of its family (``tiers``) that it does not declare cannot kill it

    @property
    def tiers(self):
        """The tiers that probe it: the contract's for an edit of contract.py alone, else the kernel's."""
        return CONTRACT_TIERS if {e.target for e in self.edits} == {C} else KERNEL_TIERS


def _mutant(name, description, kills, *edits, reason="", same_ptx=False, escapes=""):
    return Mutant(name, description, tuple(Edit(*e) for e in edits), frozenset(kills), reason, same_ptx, escapes)


R, P, C = "routing.py", "primitives.py", "contract.py"
BOTH = KERNEL_TIERS
CONTRACT = CONTRACT_TIERS
ON_THE_CPU_ALL_ON_ONE = ("on the CPU every tensor is on the CPU: the logits' own device check refuses every call "
                         "before any other tensor's device is read")
ADDRESS_NAMES_DEVICE = ("the key holds every tensor's address, and on a GPU (CUDA's unified addresses) a tensor on "
                        "another device has another address: only the CPU tier's tensor claiming another device "
                        "at the same address reaches the device left out of the key")
NOTHING_CACHED_ON_THE_CPU = ("the CPU tier keys calls with the signature alone: no call passes the device check on "
                             "the CPU, so its cache holds nothing to answer with")
NO_MISALIGNED_CUDA_ELEMENT = ("a CUDA tensor's address moves by whole elements (a view of a CUDA buffer starts on "
                              "one), so an int32 or float32 output 1 to 3 bytes off is made on the CPU alone")


def _sig(name, what, old, new="", kills=CONTRACT, escapes=""):
    """A signature mutant: ``old`` dropped from the checked-call key."""
    return _mutant(name, f"the checked-call signature without {what}", kills, (C, old, new), escapes=escapes)


def _clause(name, description, old, new, kills=CONTRACT, escapes=""):
    return _mutant(name, description, kills, (C, old, new), escapes=escapes)

KERNEL_MUTANTS = (
    # ---- float arithmetic: primitives.py emits one instruction per function
    _mutant("rcp_then_mul", "a / b as rcp.approx.ftz.f32 then mul.f32: no range scaling (sigmoid of g < -87.3)", BOTH,
            (P, '_f32_asm("div.full.f32", (a, b), loc, ip)',
             '_f32_asm("mul.f32", (a, _f32_asm("rcp.approx.ftz.f32", (b,), loc, ip)), loc, ip)')),
    _mutant("fma_contracted", "every mul.f32 contracted to fma.rn.f32 a, b, -0.0 (the same value for every input)",
            (STATIC,),
            (P, '_f32_asm("mul.f32", (a, b), loc, ip)', '_f32_asm("fma.rn.f32", (a, b, Imm(0x80000000)), loc, ip)')),
    _mutant("sigmoid_folded", "sigmoid's (0 - x) * log2e folded to x * -log2e as Triton 3.9 emits (same outputs)",
            (STATIC,), (R, "t = mul_f32(sub_f32(ZERO, x), LOG2E)", "t = mul_f32(x, Imm(0xBFB8AA3B))")),
    _mutant("sum_from_first_pick", "total starts at s_0 instead of 0.0 + s_0 (same outputs: s_0 is never -0.0)",
            (STATIC,), (R, "total = add_f32(ZERO, picked[0])", "total = picked[0]")),
    _mutant("sum_reversed", "total summed from the 8th pick down to the 1st (the picks are named leaves)", BOTH,
            (R, "total = add_f32(ZERO, picked[0])\n    for s in picked[1:]:",
             "total = add_f32(ZERO, picked[-1])\n    for s in picked[-2::-1]:")),
    _mutant("bias_of_mirrored_expert", "each score takes the bias of its lane's mirrored expert (slot 7 - j): "
            "the same opcodes and trees over other leaves", BOTH,
            (R, "zip(scores, bias)]", "zip(scores, bias[::-1])]")),
    _mutant("eps_1e-20", "renormalization eps float32(1e-20) in place of float32(1e-15)", BOTH,
            (R, "RENORM_EPS = Imm(0x26901D7D)  # float32(1e-15)", "RENORM_EPS = Imm(0x1E3CE508)  # float32(1e-20)")),
    _mutant("unscaled_weights", "renormalize=False weights are s, not s * scale", BOTH,
            (R, "return mul_f32(score, scale)", "return score")),
    _mutant("bias_in_weights", "the weights take c = s + bias instead of s (ptxas then fuses div.full's FMUL and "
            "the bias add: an FFMA)", BOTH,
            (R, "_store_scores(region + first * WORD_BYTES, scores)",
             "_store_scores(region + first * WORD_BYTES, corrected)")),
    # ---- selection
    _mutant("ties_highest_lane", "among equal keys the highest lane wins (not the lowest)", (DIFFERENTIAL,),
            (R, "return Int32(cute.arch.bfind(holders & (Uint32(0) - holders)))",
             "return Int32(cute.arch.bfind(holders))"),
            (R, "below = cute.arch.lanemask_lt()\n    for k in range(TOP_K):",
             "below = cute.arch.lanemask_gt()\n    for k in range(TOP_K):")),
    _mutant("ties_highest_slot", "among a lane's equal keys the highest expert wins", (DIFFERENTIAL,),
            (R, "Uint64(address + (SLOT_MASK - j) * WORD_BYTES)", "Uint64(address + j * WORD_BYTES)"),
            (R, "reversed_scores = scores[::-1]", "reversed_scores = scores"),
            (R, "expert = ((address - region) >> WORD_SHIFT) ^ SLOT_MASK",
             "expert = (address - region) >> WORD_SHIFT")),
    _mutant("negative_keys_unmirrored", "negative c keyed by its bits unmirrored: -2 ranks above -1, -inf above all "
            "(LLVM emits the sign flip as neg.f32)", BOTH,
            (R, "flip = (Uint32(0) - (bits >> 31)) | Uint32(SIGN_BIT)", "flip = Uint32(SIGN_BIT)")),
    _mutant("every_holder_pops", "every lane holding the best key pops its head, not only the winner", (DIFFERENTIAL,),
            (R, "won = (key == best) & ((holders & below) == 0)", "won = key == best")),
    _mutant("ties_not_detected", "a round whose best key two lanes hold keeps the speculative picks (the exact "
            "rounds never run)", (DIFFERENTIAL,),
            (R, "tied = tied | (holders & (holders - 1))", "tied = tied | (holders & Uint32(0))")),
    _mutant("sort_missing_comparator", "the lane's sorting network without its last comparator (5, 6)",
            (DIFFERENTIAL,), (R, "for i, j in SORT8:", "for i, j in SORT8[:-1]:")),
    # ---- metadata
    _mutant("cta_limit_off_by_one", "a CTA's row limit one past its expert's last row", (DIFFERENTIAL,),
            (R, "cutlass.min((cta + 1) * tile_n, first_row + count)",
             "cutlass.min((cta + 1) * tile_n, first_row + count + 1)")),
    _mutant("padding_unwritten", "the padding rows of each expert's last CTA left unwritten (not -1)", (DIFFERENTIAL,),
            (R, "            self.write_padding(mMeta, META_PERMUTED_TO_TOKEN + first_row + count,\n"
                "                               META_PERMUTED_TO_TOKEN + (first + ctas) * tile_n, 0, 1)\n", "")),
    _mutant("route_cta_limit_off_by_one", "tile >= 8 or b = 1: a CTA's row limit one past its expert's last row",
            (DIFFERENTIAL,), (R, "mMeta[META_CTA_LIMIT + cta] = first_row + count",
                              "mMeta[META_CTA_LIMIT + cta] = first_row + count + 1")),
    _mutant("route_padding_unwritten", "tile >= 8 or b = 1: the padding rows of each expert's CTA left unwritten",
            (DIFFERENTIAL,), (R, "padding = first_row + count\n", "padding = first_row + tile_n\n")),
    _mutant("route_padding_singles_halved", "tile >= 8 or b = 1: each quarter writes one of its two single padding "
            "rows, so "
            "half of the first TOP_K padding rows stay unwritten", (DIFFERENTIAL,),
            (R, "range_constexpr(TOP_K // QUARTERS)", "range_constexpr(1)")),
    _mutant("route_cta_counts_itself", "tile >= 8: an expert's CTA counts the expert itself among the picked ones "
            "below it", (DIFFERENTIAL,), (R, "_select(w == group, below, Uint32(0))",
                                          "_select(w == group, below | (below + 1), Uint32(0))")),
    _mutant("route_totals_miss_last_word", "tile >= 8: the CTA total leaves out the bitmap's last word (experts "
            "224..255)", (DIFFERENTIAL,), (R, "ctas = _picked_below(used, Int32(EXPERTS))",
                                            "ctas = _picked_below(used, Int32(EXPERTS - WARP))")),
    _mutant("route_padding_parts_overlap", "tile >= 8 or b = 1: every quarter starts its 16-byte padding stores at "
            "the first, "
            "so the stores of the later quarters' own chunks are never made", (DIFFERENTIAL,),
            (R, "cutlass.range(body_start + part * VECTOR_WORDS, body_end",
             "cutlass.range(body_start, body_end")),
    _mutant("route_rank_counts_itself", "tile >= 8: a route's row counts its own token among the earlier ones",
            (DIFFERENTIAL,), (R, "tokens & ((Uint32(1) << (NIBBLE * token)) - 1)",
                              "tokens & ((Uint32(1) << (NIBBLE * token + NIBBLE)) - 1)")),
    _mutant("foreign_route_zero", "a route to another rank's expert mapped to row 0 instead of -1", (DIFFERENTIAL,),
            (R, "mMeta[META_EXPANDED_TO_PERMUTED + warp * TOP_K + lane] = Int32(PADDING)",
             "mMeta[META_EXPANDED_TO_PERMUTED + warp * TOP_K + lane] = Int32(0)")),
    _mutant("one_token_totals_count_foreign", "b = 1: the CTA total counts the routes to other ranks' experts too",
            (DIFFERENTIAL,), (R, "popc(cute.arch.vote_ballot_sync((lane < TOP_K) & (local >= 0) & "
                                 "(local < num_local))))",
                              "popc(cute.arch.vote_ballot_sync(lane < TOP_K)))")),
    _mutant("one_token_foreign_route_zero", "b = 1: a route to another rank's expert mapped to row 0 instead of -1",
            (DIFFERENTIAL,), (R, "mMeta[META_EXPANDED_TO_PERMUTED + lane] = Int32(PADDING)",
                              "mMeta[META_EXPANDED_TO_PERMUTED + lane] = Int32(0)")),
    _mutant("token_kernels_at_b_3", "b = 3 sent to a kernel of 3 warps, which has no such path (it takes the "
            "256-thread one's with 96 threads)", (DIFFERENTIAL,),
            (R, "(rows == 2 and tile_n >= 2)", "(rows in (2, 3) and tile_n >= 2)")),
    _mutant("two_token_cta_counts_duplicates", "b = 2: an expert both tokens picked counted twice in the CTAs below",
            (DIFFERENTIAL,), (R, "(others[j] < local) & fresh,", "(others[j] < local),")),
    _mutant("two_token_rank_of_token_0", "b = 2: token 0 ranked after token 1 on an expert both picked",
            (DIFFERENTIAL,), (R, "1 + shared, shared * token,", "1 + shared, shared,")),
    _mutant("two_token_count_one", "b = 2: an expert both tokens picked counted as one token's", (DIFFERENTIAL,),
            (R, "1 + shared, shared * token,", "Int32(1), shared * token,")),
    _mutant("two_token_totals_count_duplicates", "b = 2: the CTA total counts an expert both tokens picked twice",
            (DIFFERENTIAL,), (R, "& (duplicate == 0))", ")")),
    _mutant("two_token_foreign_route_zero", "b = 2: a route to another rank's expert mapped to row 0 instead of -1",
            (DIFFERENTIAL,), (R, "mMeta[META_EXPANDED_TO_PERMUTED + token * TOP_K + lane] = Int32(PADDING)",
                              "mMeta[META_EXPANDED_TO_PERMUTED + token * TOP_K + lane] = Int32(0)")),
    # ---- programmatic dependent launch
    _mutant("bias_after_wait", "with metadata the bias is loaded after griddepcontrol.wait", (STATIC,),
            (R, "            bias = load_lane(bias_address)\n"
                "            # Every route word is zero before any is set: a barrier, before the wait.\n"
                "            cute.arch.sync_threads()\n"
                "            # Every thread writes global memory, so every thread waits for the preceding grid.\n"
                "            cute.arch.griddepcontrol_wait()\n",
             "            cute.arch.sync_threads()\n            cute.arch.griddepcontrol_wait()\n"
             "            bias = load_lane(bias_address)\n")),
    _mutant("branch_after_wait", "without metadata, warps past the last row leave after the wait (a branch)",
            (STATIC,), (R, "            if routes:\n                bias = load_lane(bias_address)\n"
                           "                cute.arch.griddepcontrol_wait()\n",
                        "            bias = load_lane(bias_address)\n            cute.arch.griddepcontrol_wait()\n"
                        "            if routes:\n")),
)

CONTRACT_MUTANTS = (
    # ---- clauses made weaker or stronger by one step (kernel/contract.py)
    _clause("logits_any_dtype", "logits of any dtype accepted", '_check_tensor("logits", logits, torch.float32,',
            '_check_tensor("logits", logits, logits.dtype,'),
    _clause("row_granule_2", "a logits row stride of 2 elements' multiple accepted (8-byte rows)",
            "logits.stride(0) % VECTOR_WORDS", "logits.stride(0) % 2"),
    _clause("row_granule_8", "a logits row stride of 4 elements' odd multiple refused (32-byte rows)",
            "logits.stride(0) % VECTOR_WORDS", "logits.stride(0) % (2 * VECTOR_WORDS)"),
    _clause("column_stride_free", "a logits column stride other than 1 accepted",
            "if logits.stride(1) != 1 or logits.stride(0) % VECTOR_WORDS:", "if logits.stride(0) % VECTOR_WORDS:"),
    _clause("logits_align_8", "logits aligned to 8 bytes accepted", '_check_aligned("logits", logits, TENSOR_ALIGN)',
            '_check_aligned("logits", logits, 8)'),
    _clause("tensor_align_32", "logits, bias and metadata must be 32-byte aligned (16 refused)",
            "\nCACHE_LIMIT = 4096", "\nTENSOR_ALIGN = 32\nCACHE_LIMIT = 4096"),
    _mutant("logits_alignment_after_devices", "the logits' alignment checked after the devices", CONTRACT,
            (C, '    _check_aligned("logits", logits, TENSOR_ALIGN)\n', ""),
            (C, "    _check_devices({**inputs, **outputs})\n",
             '    _check_devices({**inputs, **outputs})\n    _check_aligned("logits", logits, TENSOR_ALIGN)\n')),
    _clause("bias_any_shape", "a bias of any shape accepted", '_check_tensor("bias", bias, torch.float32, (EXPERTS,))',
            '_check_tensor("bias", bias, torch.float32, tuple(bias.shape))'),
    _clause("bias_strided", "a strided bias accepted", '_check_contiguous("bias", bias, TENSOR_ALIGN)',
            '_check_aligned("bias", bias, TENSOR_ALIGN)'),
    _clause("bias_align_4", "a bias aligned to its element accepted", '_check_contiguous("bias", bias, TENSOR_ALIGN)',
            '_check_contiguous("bias", bias, bias.element_size())'),
    _clause("ids_strided", "strided ids accepted", '_check_contiguous("ids", ids, ids.element_size())',
            '_check_aligned("ids", ids, ids.element_size())'),
    _clause("ids_unaligned", "ids at any byte address accepted", '_check_contiguous("ids", ids, ids.element_size())',
            '_check_contiguous("ids", ids, 1)', kills=(CONTRACT_CPU,), escapes=NO_MISALIGNED_CUDA_ELEMENT),
    _clause("ids_align_16", "ids must be 16-byte aligned (4 refused)",
            '_check_contiguous("ids", ids, ids.element_size())', '_check_contiguous("ids", ids, TENSOR_ALIGN)'),
    _clause("weights_any_dtype", "weights of any dtype accepted", '_check_tensor("weights", weights, torch.float32,',
            '_check_tensor("weights", weights, weights.dtype,'),
    _clause("weights_any_rows", "weights of any row count accepted", "weights, torch.float32, (b, TOP_K)",
            "weights, torch.float32, (weights.shape[0], TOP_K)"),
    _clause("scale_infinite", "an infinite scale accepted (NaN still refused)",
            "finite = bool(np.isfinite(np.float32(scale)))", "finite = not bool(np.isnan(np.float32(scale)))"),
    _clause("scale_finite_in_float64", "a scale finite in float64 but not in float32 accepted",
            "finite = bool(np.isfinite(np.float32(scale)))", "finite = bool(np.isfinite(np.float64(scale)))"),
    _clause("scale_bool", "a bool scale accepted",
            "    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):",
            "    if not isinstance(scale, numbers.Real):"),
    _clause("renormalize_int", "an int renormalize accepted", "if not isinstance(renormalize, bool):",
            "if not isinstance(renormalize, (bool, int)):"),
    _clause("int_bool", "a bool accepted as an int (tile_n, the local range)",
            "    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= value <= high:",
            "    if not isinstance(value, numbers.Integral) or not low <= value <= high:"),
    _clause("tile_free_without_metadata", "a tile_n other than 0 accepted without metadata",
            '("num_local_experts", num_local_experts), ("tile_n", tile_n)):',
            '("num_local_experts", num_local_experts)):'),
    _clause("metadata_any_dtype", "metadata of any dtype accepted", '_check_tensor("metadata", metadata, torch.int32,',
            '_check_tensor("metadata", metadata, metadata.dtype,'),
    _clause("metadata_align_4", "metadata aligned to its element accepted",
            '_check_contiguous("metadata", metadata, TENSOR_ALIGN)',
            '_check_contiguous("metadata", metadata, metadata.element_size())'),
    _clause("outputs_may_alias_inputs", "an output overlapping an input accepted",
            "for other in names[i + 1:] + list(inputs):", "for other in names[i + 1:]:"),
    _clause("touching_is_overlap", "an output just touching another tensor refused",
            "a0 < b1 and b0 < a1", "a0 <= b1 and b0 <= a1"),
    _clause("span_short_of_last_element", "a span that leaves out its last element (overlap by one element accepted)",
            "return start, start + (last + 1) * t.element_size()", "return start, start + last * t.element_size()"),
    _clause("metadata_outside_overlap_and_devices", "metadata left out of the overlap and device checks",
            '{"metadata": metadata, "ids": ids, "weights": weights}', '{"ids": ids, "weights": weights}'),
    _clause("output_devices_unchecked", "only the inputs' devices checked", "_check_devices({**inputs, **outputs})",
            "_check_devices(inputs)", kills=(CONTRACT_GPU,), escapes=ON_THE_CPU_ALL_ON_ONE),
    _clause("cuda_not_required", "logits on any device accepted (the others on the logits')",
            '    if device.type != "cuda":\n        _fail("logits", f"must be on a CUDA device, got {device}")\n', ""),
    # ---- attributes dropped from the checked-call signature (kernel/contract.py's signature)
    _sig("signature_without_scale_type", "the scale's type", "key = (type(scale), scale,", "key = (scale,"),
    _sig("signature_without_scale_sign", "the sign of a zero scale", "math.copysign(1.0, scale), "),
    _sig("signature_without_renormalize_type", "renormalize's type", "type(renormalize), "),
    _sig("signature_without_offset_type", "local_expert_offset's type", "type(local_expert_offset), "),
    _sig("signature_without_count_type", "num_local_experts' type", "type(num_local_experts), "),
    _sig("signature_without_tile_type", "tile_n's type", "type(tile_n), tile_n,", "tile_n,"),
    _sig("signature_without_tile", "tile_n's value", "type(tile_n), tile_n,", "type(tile_n),"),
    _sig("signature_without_logits_strides", "the logits' strides", "logits.stride(), "),
    _sig("signature_without_bias_address", "the bias' address", "bias.data_ptr(), "),
    _sig("signature_without_weights_shape", "the weights' shape", "weights.shape, "),
    _sig("signature_without_ids_type", "the ids' type", "type(ids), "),
    _sig("signature_without_ids_device", "the ids' device", "ids.dtype, ids.device,", "ids.dtype,",
         kills=(CONTRACT_CPU,), escapes=ADDRESS_NAMES_DEVICE),
    _sig("signature_without_metadata_dtype", "the metadata's dtype", "metadata.dtype,\n", "\n"),
    _sig("signature_without_metadata", "the metadata's presence and attributes",
         "        if metadata is None:\n            return key\n", "        return key\n"),
    # ---- the cache of checked calls (kernel/contract.py's CheckedCalls)
    _clause("last_key_unchecked", "the cache answers every call after a repeated one with that call's launch (its "
            "last key found taken for any key)", "            if key == self._last_key:\n",
            "            if self._last_key is not None:\n", kills=(CONTRACT_GPU,), escapes=NOTHING_CACHED_ON_THE_CPU),
)

CATALOG = KERNEL_MUTANTS + CONTRACT_MUTANTS

EQUIVALENT = (
    _mutant("neg_zero_as_pos_zero", "-0.0 keyed as +0.0 (the canonicalisation the kernel leaves out)", (),
            (R, "    bits = c.bitcast(Uint32)\n",
             "    bits = c.bitcast(Uint32)\n    bits = _select(bits == Uint32(SIGN_BIT), Uint32(0), bits)\n"),
            reason="c = s + bias is never -0.0: s >= +0.0 and a round-to-nearest add gives -0.0 only for "
                   "(-0.0) + (-0.0)"),
    _mutant("popped_slot_neg_inf", "a popped slot keyed as -inf instead of 0", (),
            (R, "[_select(won, Uint64(0), words[-1])]", "[_select(won, Uint64(0x007FFFFF << KEY_SHIFT), words[-1])]"),
            reason="a lane pops at most 7 times (TOP_K - 1) and holds 8 words, so a popped slot never reaches the "
                   "head: the value is dead, and the compiler drops it (the PTX is the real kernel's)", same_ptx=True),
)


# ---------------------------------------------------------------------------------------------- making a mutant

def replace_once(text, old, new, what):
    """``text`` with ``old`` replaced by ``new``; MutantEditError (naming ``what``) unless ``old`` occurs
    exactly once: a refactor must not silently disarm a mutant."""
    count = text.count(old)
    if count != 1:
        raise MutantEditError(f"{what} expects this text exactly once, found {count} times (was the code "
                              f"refactored? update the catalog):\n{old}")
    return text.replace(old, new)


def mutated_sources(mutant):
    """{target file name: edited text}; MutantEditError unless every old text occurs exactly once."""
    texts = {}
    for edit in mutant.edits:
        if edit.target not in TARGETS:
            raise MutantEditError(f"mutant {mutant.name}: target {edit.target!r} is not one of {TARGETS}")
        text = texts.get(edit.target) or (KERNEL_DIR / edit.target).read_text()
        texts[edit.target] = replace_once(text, edit.old, edit.new, f"mutant {mutant.name}: its edit of kernel/{edit.target}")
    return texts


def check_catalog(mutants=CATALOG + EQUIVALENT):
    """Every name unique, every declared tier one of its family's, a tier of its family left undeclared only
    with the reason it escapes, every edit applying exactly once (MutantEditError)."""
    names = [m.name for m in mutants]
    if len(set(names)) != len(names):
        raise MutantEditError(f"duplicate mutant names in {names}")
    for mutant in mutants:
        if not mutant.kills <= set(mutant.tiers) or (not mutant.kills and not mutant.reason):
            raise MutantEditError(f"mutant {mutant.name}: kills {set(mutant.kills)} must name tiers of "
                                  f"{mutant.tiers}")
        if mutant.tiers == CONTRACT_TIERS and (set(mutant.tiers) - mutant.kills) and not mutant.escapes:
            raise MutantEditError(f"mutant {mutant.name}: says neither that {set(mutant.tiers) - mutant.kills} "
                                  "kills it nor why it cannot")
        mutated_sources(mutant)


def materialise(mutant, folder):
    """folder/kernel: a copy of the kernel package with the mutant's edits (None: unedited)."""
    shutil.copytree(KERNEL_DIR, folder / "kernel", ignore=shutil.ignore_patterns("__pycache__"))
    if mutant is not None:
        for target, text in mutated_sources(mutant).items():
            (folder / "kernel" / target).write_text(text)
    return folder / "kernel"
