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
properties/contract/ with CPU and with CUDA tensors): the CPU tests hold its CPU tiers to it
(tests/test_mutants_cpu.py); the generated run, which yields these as its "hand" mutants, needs some tier to
kill it. A mutant that no output can show (sigmoid's constant folded) is declared static only; a contract
mutant one of whose tiers cannot reach its clause says why (``escapes``).
"""

import shutil
from dataclasses import dataclass

from common.provenance import REPO_ROOT

KERNEL_DIR = REPO_ROOT / "kernel"
TARGETS = ("routing.py", "primitives.py", "contract.py")
STATIC, DIFFERENTIAL = "static", "differential"
CONTRACT_CPU, CONTRACT_GPU = "contract-cpu", "contract-gpu"
KERNEL_TIERS, CONTRACT_TIERS = (STATIC, DIFFERENTIAL), (CONTRACT_CPU, CONTRACT_GPU)


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
    reason: str = ""  # why no generated operator makes it
    escapes: str = ""  # why a tier of its family (``tiers``) that it does not declare cannot kill it

    @property
    def tiers(self):
        """The tiers that probe it: the contract's for an edit of contract.py alone, else the kernel's."""
        return CONTRACT_TIERS if {e.target for e in self.edits} == {C} else KERNEL_TIERS


def _mutant(name, description, kills, *edits, reason="", escapes=""):
    return Mutant(name, description, tuple(Edit(*e) for e in edits), frozenset(kills), reason, escapes)


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

# The hand-written mutants: each edit no generated operator (properties/mutants/generate.py) makes, with the
# reason. generate.generate() yields them as mutants of its "hand" operator, so the generated run covers them.
KERNEL_MUTANTS = (
    _mutant("sigmoid_folded", "sigmoid's (0 - x) * log2e folded to x * -log2e as Triton 3.9 emits (same outputs)",
            (STATIC,), (R, "t = mul_f32(sub_f32(ZERO, x), LOG2E)", "t = mul_f32(x, Imm(0xBFB8AA3B))"),
            reason="an expression rewritten into another of the same value (two operations folded into one with a "
                   "new constant): operators change a value; only the codegen check of Triton's sequence sees this"),
    _mutant("sum_from_first_pick", "total starts at s_0 instead of 0.0 + s_0 (same outputs: s_0 is never -0.0)",
            (STATIC,), (R, "total = add_f32(ZERO, picked[0])", "total = picked[0]"),
            reason="an operation removed and its operand kept, which keeps the value: operators change a value; only "
                   "the codegen check of Triton's sequence sees this"),
    _mutant("sum_reversed", "total summed from the 8th pick down to the 1st (the picks are named leaves)", BOTH,
            (R, "total = add_f32(ZERO, picked[0])\n    for s in picked[1:]:",
             "total = add_f32(ZERO, picked[-1])\n    for s in picked[-2::-1]:"),
            reason="a reduction's order reversed (an index and a slice changed together): no operator reorders the "
                   "leaves of a reduction"),
    _mutant("bias_of_mirrored_expert", "each score takes the bias of its lane's mirrored expert (slot 7 - j): "
            "the same opcodes and trees over other leaves", BOTH,
            (R, "zip(scores, bias)]", "zip(scores, bias[::-1])]"),
            reason="an operand read from the same values in reversed order: no operator reverses a sequence"),
    _mutant("bias_in_weights", "the weights take c = s + bias instead of s (ptxas then fuses div.full's FMUL and "
            "the bias add: an FFMA)", BOTH,
            (R, "_store_scores(region + first * WORD_BYTES, scores)",
             "_store_scores(region + first * WORD_BYTES, corrected)"),
            reason="an operand replaced by another local of the same type: no operator picks another variable"),
    _mutant("ties_highest_lane", "among equal keys the highest lane wins (not the lowest)", (DIFFERENTIAL,),
            (R, "return Int32(cute.arch.bfind(holders & (Uint32(0) - holders)))",
             "return Int32(cute.arch.bfind(holders))"),
            (R, "below = cute.arch.lanemask_lt()\n    for k in range(TOP_K):",
             "below = cute.arch.lanemask_gt()\n    for k in range(TOP_K):"),
            reason="two edits in two functions that together make another consistent tie rule; an operator makes "
                   "one edit at one site"),
    _mutant("ties_highest_slot", "among a lane's equal keys the highest expert wins", (DIFFERENTIAL,),
            (R, "Uint64(address + (SLOT_MASK - j) * WORD_BYTES)", "Uint64(address + j * WORD_BYTES)"),
            (R, "reversed_scores = scores[::-1]", "reversed_scores = scores"),
            (R, "expert = ((address - region) >> WORD_SHIFT) ^ SLOT_MASK",
             "expert = (address - region) >> WORD_SHIFT"),
            reason="three edits in three functions that together make another consistent tie rule; an operator "
                   "makes one edit at one site"),
    _mutant("route_cta_limit_off_by_one", "tile >= 8 or b = 1: a CTA's row limit one past its expert's last row",
            (DIFFERENTIAL,), (R, "mMeta[META_CTA_LIMIT + cta] = first_row + count",
                              "mMeta[META_CTA_LIMIT + cta] = first_row + count + 1"),
            reason="one added to a sum of names: operators move an integer literal or a bound by one, and this "
                   "store holds neither"),
    _mutant("branch_after_wait", "without metadata, warps past the last row leave after the wait (a branch)",
            (STATIC,), (R, "            if routes:\n                bias = load_lane(bias_address)\n"
                           "                cute.arch.griddepcontrol_wait()\n",
                        "            bias = load_lane(bias_address)\n            cute.arch.griddepcontrol_wait()\n"
                        "            if routes:\n"),
            reason="statements moved out of the branch that holds them: operators move a barrier or a wait within "
                   "its own block"),
)

CONTRACT_MUTANTS = (
    _mutant("logits_alignment_after_devices", "the logits' alignment checked after the devices", CONTRACT,
            (C, '    _check_aligned("logits", logits, TENSOR_ALIGN)\n', ""),
            (C, "    _check_devices({**inputs, **outputs})\n",
             '    _check_devices({**inputs, **outputs})\n    _check_aligned("logits", logits, TENSOR_ALIGN)\n'),
            reason="a check moved past ten statements (the order of the contract's refusals): operators move a "
                   "statement past its neighbour at most"),
)

CATALOG = KERNEL_MUTANTS + CONTRACT_MUTANTS
MAX_HAND = 10  # the most hand-written mutants the catalog holds: what an operator can make is the generated set's

# Each catalog mutant a generated operator now expresses, by the generated mutants that make its fault: the same
# edit where the operator makes it, else the same clause broken at the same site. A test checks each name is
# generated, so the mapping cannot rot.
EXPRESSED = {
    "rcp_then_mul": ("primitives.div_full_f32.ptx_sibling.0",),
    "fma_contracted": ("primitives.mul_f32.ptx_sibling.0",),
    "eps_1e-20": ("routing.module.int_plus_one.4", "routing.module.int_minus_one.4",
                  "routing._weight.constant_neighbour.1"),
    "unscaled_weights": ("routing._weight.call_sibling.0",),
    "negative_keys_unmirrored": ("routing._order_key.int_plus_one.1", "routing._order_key.bit_swap.1"),
    "every_holder_pops": ("routing._top_k_exact.bit_swap.1", "routing._top_k_exact.compare_flip.3"),
    "ties_not_detected": ("routing._top_k.statements_exchanged.0",),
    "sort_missing_comparator": ("network.module.int_minus_one.37",),
    "cta_limit_off_by_one": ("routing.Routing.write_expert_metadata.call_sibling.1",),
    "padding_unwritten": ("routing.Routing.write_expert_metadata.statement_dropped.0",),
    "route_padding_unwritten": ("routing.Routing.write_route.statement_dropped.0",),
    "route_padding_singles_halved": ("routing.Routing.write_route.bound_minus_one.0",),
    "route_cta_counts_itself": ("routing._picked_below.select_swap.1", "routing._picked_below.compare_flip.1"),
    "route_totals_miss_last_word": ("routing._picked_below.compare_flip.0",),
    "route_padding_parts_overlap": ("routing.Routing.write_padding.constant_neighbour.0",),
    "route_rank_counts_itself": ("routing.Routing.write_route_metadata.int_plus_one.4",),
    "foreign_route_zero": ("routing.Routing.kernel.constant_neighbour.9",),
    "one_token_totals_count_foreign": ("routing.Routing.write_one_token_metadata.bit_swap.2",),
    "one_token_foreign_route_zero": ("routing.Routing.write_one_token_metadata.statement_dropped.0",),
    "token_kernels_at_b_3": ("routing.kernel_tokens.int_plus_one.1",),
    "two_token_cta_counts_duplicates": ("routing.Routing.write_two_token_metadata.bit_swap.8",),
    "two_token_rank_of_token_0": ("routing.Routing.write_two_token_metadata.int_minus_one.23",),
    "two_token_count_one": ("routing.Routing.write_two_token_metadata.int_plus_one.23",),
    "two_token_totals_count_duplicates": ("routing.Routing.write_two_token_metadata.compare_flip.17",),
    "two_token_foreign_route_zero": ("routing.Routing.write_two_token_metadata.statement_dropped.0",),
    "bias_after_wait": ("routing.Routing.kernel.sync_earlier.1",),
    "logits_any_dtype": ("contract.check_arguments.check_removed.3",),
    "row_granule_2": ("contract.check_arguments.check_removed.4",),
    "row_granule_8": ("contract.check_arguments.constant_neighbour.1",),
    "column_stride_free": ("contract.check_arguments.bool_swap.1", "contract.check_arguments.compare_flip.3"),
    "logits_align_8": ("contract.check_arguments.check_removed.5",),
    "tensor_align_32": ("contract._check_metadata.constant_neighbour.2",),
    "bias_any_shape": ("contract.check_arguments.check_removed.6",),
    "bias_strided": ("contract.check_arguments.call_sibling.1",),
    "bias_align_4": ("contract.check_arguments.check_removed.7",),
    "ids_strided": ("contract.check_arguments.call_sibling.2",),
    "ids_unaligned": ("contract.check_arguments.check_removed.9",),
    "ids_align_16": ("contract.check_arguments.check_removed.9",),
    "weights_any_dtype": ("contract.check_arguments.check_removed.10",),
    "weights_any_rows": ("contract.check_arguments.check_removed.10",),
    "scale_infinite": ("contract._check_scale.call_sibling.0",),
    "scale_finite_in_float64": ("contract._check_scale.call_sibling.1",),
    "scale_bool": ("contract._check_scale.bool_swap.0",),
    "renormalize_int": ("contract.check_arguments.check_removed.13",),
    "int_bool": ("contract._check_int.bool_swap.0",),
    "tile_free_without_metadata": ("contract._check_metadata.check_removed.0",),
    "metadata_any_dtype": ("contract._check_metadata.check_removed.5",),
    "metadata_align_4": ("contract._check_metadata.constant_neighbour.2",),
    "outputs_may_alias_inputs": ("contract._check_no_overlap.check_removed.0",),
    "touching_is_overlap": ("contract._check_no_overlap.compare_boundary.0",),
    "span_short_of_last_element": ("contract._span.int_minus_one.1",),
    "metadata_outside_overlap_and_devices": ("contract.check_arguments.select_swap.0",),
    "output_devices_unchecked": ("contract.check_arguments.check_removed.16",),
    "cuda_not_required": ("contract._check_devices.check_removed.0",),
    "signature_without_scale_type": ("contract.signature.element_dropped.0",),
    "signature_without_scale_sign": ("contract.signature.element_dropped.2",),
    "signature_without_renormalize_type": ("contract.signature.element_dropped.3",),
    "signature_without_offset_type": ("contract.signature.element_dropped.5",),
    "signature_without_count_type": ("contract.signature.element_dropped.7",),
    "signature_without_tile_type": ("contract.signature.element_dropped.9",),
    "signature_without_tile": ("contract.signature.element_dropped.10",),
    "signature_without_logits_strides": ("contract.signature.element_dropped.14",),
    "signature_without_bias_address": ("contract.signature.element_dropped.18",),
    "signature_without_weights_shape": ("contract.signature.element_dropped.31",),
    "signature_without_ids_type": ("contract.signature.element_dropped.23",),
    "signature_without_ids_device": ("contract.signature.element_dropped.28",),
    "signature_without_metadata_dtype": ("contract.signature.element_dropped.39",),
    "signature_without_metadata": ("contract.signature.compare_flip.0",),
    "last_key_unchecked": ("contract.CheckedCalls.get.compare_flip.0",),
}


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


def check_catalog(mutants=CATALOG):
    """Every name unique, at least one tier declared and each one of its family's, a tier of its family left
    undeclared only with the reason it escapes, every edit applying exactly once (MutantEditError)."""
    names = [m.name for m in mutants]
    if len(set(names)) != len(names):
        raise MutantEditError(f"duplicate mutant names in {names}")
    for mutant in mutants:
        if not mutant.kills or not mutant.kills <= set(mutant.tiers):
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
