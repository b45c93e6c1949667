"""The mutant catalog: edits of the real kernel's source in known-wrong ways that `make verify`'s checks must
catch, and the making of an edited copy.

A mutant is a list of exact source edits (old text -> new text) to kernel/routing.py or kernel/primitives.py.
Nothing is kept as a copy of the kernel: each mutant is made at run time by copying the ``kernel`` package
into a fresh folder and applying its edits (an edit whose old text does not occur exactly once stops the run:
a refactor of the kernel must not silently disarm a mutant). A mutant declares the tiers expected to kill it
(properties/mutants/probe.py: "static" runs the codegen checks on any CPU, "differential" routes the
adversarial rows on the GPU); every declared tier must kill it. A mutant that no output can show (ex2's .ftz
inside the sigmoid, an fma with a -0.0 addend) is declared static only.

EQUIVALENT lists edits that look like bugs but cannot change the kernel, each with the reason; they are not
run and not counted, but their edits must still apply.
"""

import shutil
from dataclasses import dataclass

from oracles.provenance import REPO_ROOT

KERNEL_DIR = REPO_ROOT / "kernel"
TARGETS = ("routing.py", "primitives.py")
STATIC, DIFFERENTIAL = "static", "differential"
TIERS = (STATIC, DIFFERENTIAL)


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


def _mutant(name, description, kills, *edits, reason="", same_ptx=False):
    return Mutant(name, description, tuple(Edit(*e) for e in edits), frozenset(kills), reason, same_ptx)


R, P = "routing.py", "primitives.py"
BOTH = TIERS

CATALOG = (
    # ---- float arithmetic: primitives.py emits one instruction per function
    _mutant("ex2_ftz", "ex2.approx.ftz.f32 in place of ex2.approx.f32 (same outputs: 1 + e absorbs a subnormal e)",
            (STATIC,),
            (P, '_f32_asm("ex2.approx.f32", (a,), loc, ip)', '_f32_asm("ex2.approx.ftz.f32", (a,), loc, ip)')),
    _mutant("div_rn", "div.rn.f32 (IEEE division) in place of div.full.f32", BOTH,
            (P, '_f32_asm("div.full.f32", (a, b), loc, ip)', '_f32_asm("div.rn.f32", (a, b), loc, ip)')),
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
            (R, "winner = Int32(cute.arch.bfind(holders & (Uint32(0) - holders)))",
             "winner = Int32(cute.arch.bfind(holders))"),
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
    _mutant("sort_missing_comparator", "the lane's sorting network without its last comparator (5, 6)",
            (DIFFERENTIAL,), (R, "for i, j in SORT8:", "for i, j in SORT8[:-1]:")),
    # ---- metadata
    _mutant("cta_limit_off_by_one", "a CTA's row limit one past its expert's last row", (DIFFERENTIAL,),
            (R, "cutlass.min((cta + 1) * tile_n, first_row + count)",
             "cutlass.min((cta + 1) * tile_n, first_row + count + 1)")),
    _mutant("padding_unwritten", "the padding rows of each expert's last CTA left unwritten (not -1)", (DIFFERENTIAL,),
            (R, "            self.write_padding(mMeta, META_PERMUTED_TO_TOKEN + first_row + count,\n"
                "                               META_PERMUTED_TO_TOKEN + (first + ctas) * tile_n)\n", "")),
    _mutant("foreign_route_zero", "a route to another rank's expert mapped to row 0 instead of -1", (DIFFERENTIAL,),
            (R, "mMeta[META_EXPANDED_TO_PERMUTED + warp * TOP_K + lane] = Int32(PADDING)",
             "mMeta[META_EXPANDED_TO_PERMUTED + warp * TOP_K + lane] = Int32(0)")),
    _mutant("local_range_inclusive", "the expert just past the local range counted as local in the route rows",
            (DIFFERENTIAL,), (R, "if local >= 0 and local < num_local:\n                        cute.arch.atomic_or",
                              "if local >= 0 and local <= num_local:\n                        cute.arch.atomic_or")),
    _mutant("route_rows_off_by_one", "one route row past the last token's written (-1 past the routes)",
            (DIFFERENTIAL,), (R, "if lane < TOP_K:", "if lane <= TOP_K:")),
    # ---- programmatic dependent launch
    _mutant("logits_before_wait", "without metadata the row is routed (logits loaded) before griddepcontrol.wait",
            (STATIC,),
            (R, "cute.arch.griddepcontrol_wait()\n"
                "                _route_row(mLogits, mIds, mWeights, sScores, bias, warp, lane, scale, "
                "self.renormalize)\n",
             "_route_row(mLogits, mIds, mWeights, sScores, bias, warp, lane, scale, self.renormalize)\n"
             "                cute.arch.griddepcontrol_wait()\n")),
    _mutant("bias_after_wait", "with metadata the bias is loaded after griddepcontrol.wait", (STATIC,),
            (R, "            bias = _load_lane(bias_address)\n"
                "            # Every route word is zero before any is set: a barrier, before the wait.\n"
                "            cute.arch.sync_threads()\n"
                "            # Every thread writes global memory, so every thread waits for the preceding grid.\n"
                "            cute.arch.griddepcontrol_wait()\n",
             "            cute.arch.sync_threads()\n            cute.arch.griddepcontrol_wait()\n"
             "            bias = _load_lane(bias_address)\n")),
    _mutant("branch_after_wait", "without metadata, warps past the last row leave after the wait (a branch)",
            (STATIC,), (R, "            if warp < rows:\n                bias = _load_lane(bias_address)\n"
                           "                cute.arch.griddepcontrol_wait()\n",
                        "            bias = _load_lane(bias_address)\n            cute.arch.griddepcontrol_wait()\n"
                        "            if warp < rows:\n")),
)

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
    """Every name unique, every declared tier known, every edit applying exactly once (MutantEditError)."""
    names = [m.name for m in mutants]
    if len(set(names)) != len(names):
        raise MutantEditError(f"duplicate mutant names in {names}")
    for mutant in mutants:
        if not mutant.kills <= set(TIERS) or (not mutant.kills and not mutant.reason):
            raise MutantEditError(f"mutant {mutant.name}: kills {set(mutant.kills)} must name tiers of {TIERS}")
        mutated_sources(mutant)


def materialise(mutant, folder):
    """folder/kernel: a copy of the kernel package with the mutant's edits (None: unedited)."""
    shutil.copytree(KERNEL_DIR, folder / "kernel", ignore=shutil.ignore_patterns("__pycache__"))
    if mutant is not None:
        for target, text in mutated_sources(mutant).items():
            (folder / "kernel" / target).write_text(text)
    return folder / "kernel"
