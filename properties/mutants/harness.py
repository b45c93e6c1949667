"""The harness mutant catalog: wrong changes to the harness's own code and recorded data that the CPU suite
must catch, each attributed to the test meant to catch it (issue 16).

A harness mutant is a list of exact source edits (old text -> new text, each old text occurring exactly once,
like the kernel's catalog: properties/mutants/catalog.py) to files of the repository, or a change of recorded
corpus data (a function of the copied tree, which must change what it says it changes). It names its
intended killers: pytest node ids, run on a copy of the tree with the mutant applied
(properties/mutants/harness_run.py).
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from properties.engine import casefile
from properties.mutants.catalog import MutantEditError, replace_once

ROUTING = "oracles/numpy_model/routing.py"
PRIMITIVES = "oracles/numpy_model/primitives.py"
CASEFILE = "properties/engine/casefile.py"
REPLAY = "properties/replay.py"
INVARIANTS = "properties/engine/invariants.py"
CHECKS = "properties/codegen/checks.py"
FLOAT_OPS = "oracles/ptx/float_ops.py"
FPENV = "common/fpenv.py"
GATE = "properties/tools/gate.py"
PROGRESS = "properties/tools/progress.py"
SOAK_CLI = "properties/soak/__main__.py"
SOAK_SCHEDULE = "properties/soak/schedule.py"
SOAK_LAUNCHES = "properties/soak/launches.py"
SOAK_GRAPHED = "properties/soak/graphed.py"
KERNEL_MUTANTS_CLI = "properties/mutants/__main__.py"
HARNESS_RUN = "properties/mutants/harness_run.py"
KERNEL_MUTANTS_GENERATED = "properties/mutants/generated.py"
BENCH_CLI = "properties/bench/cli.py"
BENCH_VARIANTS = "properties/bench/variants.py"
REGRESSION = "corpora/regression"

MODEL_T = "tests/test_model_routing.py::"
STATIC_T = "tests/test_kernel_static_cpu.py::"
CORPUS_T = "tests/test_corpus_cpu.py::"
CASEFILE_T = "tests/test_casefile_roundtrip_cpu.py::"
CASEFILE_READ_T = "tests/test_casefile_cpu.py::"
STRICT_T = "tests/test_casefile_strict_cpu.py::test_each_fault_is_refused_through_the_api_naming_it"
INV_T = "tests/test_invariants_cpu.py::test_a_hand_made_break_is_reported"
SAMPLE_T = "tests/test_model_hardware_sample.py::test_model_matches_recorded_hardware"
COMMON_T = "tests/test_model_hardware_sample.py::test_the_numpy_common_path_gives_the_torch_bits_at_its_edges"
GATE_T = "tests/test_gate_cpu.py::"
GATE_PROGRESS_T = "tests/test_gate_progress_cpu.py::"
REGISTRY_PY = "properties/engine/implementations.py"
PLUGINS_PY = "properties/engine/plugins.py"
VERDICT_PY = "properties/soak/verdict.py"
PLUGINS_T = "tests/test_plugins_cpu.py::"
VACUOUS_T = "tests/test_vacuous_runs_cpu.py::"
CLEAN_T = "tests/test_clean_tree_cpu.py::"
SCHEDULE_T = "tests/test_soak_schedule_cpu.py::"
VARIANTS_T = "tests/test_bench_variants_cpu.py::"
GENERATED_T = "tests/test_mutants_generated_cpu.py::"


@dataclass(frozen=True)
class HarnessMutant:
    """``edits``: (path, old, new) each applied exactly once; ``data``: a change of the copied tree's recorded
    data, returning how many files it changed, which must be ``files``. ``killers``: the pytest node ids that
    must fail on an assertion."""

    name: str
    target: str
    description: str
    killers: tuple
    edits: tuple = ()
    data: Callable | None = None
    files: int = 0


def _m(name, target, description, killers, *edits):
    killers = (killers,) if isinstance(killers, str) else tuple(killers)
    return HarnessMutant(name, target, description, killers, tuple((target, old, new) for old, new in edits))


# ---------------------------------------------------------------------------------------------- recorded data

def _regression_files(root):
    return sorted((root / REGRESSION).glob("*.json"))


def _rewrite(path, change):
    data = json.loads(path.read_text())
    if change(data) is False:
        return 0
    path.write_text(json.dumps(data, indent=1) + "\n")
    return 1


def _drop_from_field(name, field):
    def change(data):
        if not any(name in entry["by"] for entry in data["outputs"][field]):
            return False
        for entry in data["outputs"][field]:
            entry["by"] = [n for n in entry["by"] if n != name]
        data["outputs"][field] = [entry for entry in data["outputs"][field] if entry["by"]]
    return change


def _drop_cute_metadata(root):
    return sum(_rewrite(path, _drop_from_field("cute", "metadata")) for path in _regression_files(root))


def _first_metadata_file(root):
    return next(p for p in _regression_files(root) if json.loads(p.read_text())["inputs"]["tile_n"] is not None)


def _drop_triton_weights_of_one(root):
    return _rewrite(_first_metadata_file(root), _drop_from_field("triton", "weights"))


def _flip_in_first_entry(field, flip):
    def change(data):
        entry = data["outputs"][field][0]
        entry["value"] = flip(entry["value"])
    return change


def _flip_first_word(text, parse, fmt):
    """Case-file words (runs as ``word*count``) with the lowest bit of the first word flipped."""
    size = sum(int(token.partition("*")[2] or 1) for token in text.split())
    words = casefile.decode_words(text, parse, np.int64, size)
    words[0] ^= 1
    return casefile.encode_words(words, fmt)


def _flip_weight_bit(root):
    flip = lambda rows: [_flip_first_word(rows[0], lambda w: int(w, 16), lambda w: f"{int(w):08x}")] + rows[1:]  # noqa: E731
    return _rewrite(_first_metadata_file(root), _flip_in_first_entry("weights", flip))


def _change_one_id(root):
    def flip(rows):
        rows[0][-1] = next(e for e in range(256) if e not in rows[0])
        return rows
    return _rewrite(_first_metadata_file(root), _flip_in_first_entry("ids", flip))


def _change_one_metadata_element(root):
    flip = lambda text: _flip_first_word(text, int, lambda w: str(int(w)))  # noqa: E731
    return _rewrite(_first_metadata_file(root), _flip_in_first_entry("metadata", flip))


def _drop_one_recording(root):
    _first_metadata_file(root).unlink()
    return 1


def _d(name, description, killers, change, files):
    killers = (killers,) if isinstance(killers, str) else tuple(killers)
    return HarnessMutant(name, REGRESSION, description, killers, (), change, files)


FIRST_GENERATOR = "all_equal"  # the generator of the first regression file with metadata (checked by a CPU test)
REPLAYED = f"{CORPUS_T}test_every_recorded_output_equals_the_model[{FIRST_GENERATOR}]"

CATALOG = (
    # ---- the model's routing and weights
    _m("model_sum_reversed", ROUTING, "the weight total summed from the 8th pick down",
       MODEL_T + "test_the_weight_sum_runs_in_pick_order_rounding_each_step",
       ("for k in range(TOP_K):\n        total = add_rn", "for k in reversed(range(TOP_K)):\n        total = add_rn")),
    _m("model_sum_rounded_once", ROUTING, "the weight total summed exactly (float64) and rounded once",
       MODEL_T + "test_the_weight_sum_runs_in_pick_order_rounding_each_step",
       ("    for k in range(TOP_K):\n        total = add_rn(total, picked[:, k])\n",
        "    total = picked.astype(np.float64).sum(1).astype(np.float32)\n")),
    _m("model_eps_1e-20", ROUTING, "renormalization eps float32(1e-20)",
       MODEL_T + "test_the_eps_is_float32_1e_15_added_to_the_total",
       ("ROUTER_EPS = np.float32(1e-15)", "ROUTER_EPS = np.float32(1e-20)")),
    _m("model_weights_from_c", ROUTING, "weights from c = s + bias instead of s",
       MODEL_T + "test_bias_dominates_selection_but_not_the_weights",
       ("picked = _take_rows(xp, score, ids)", "picked = _take_rows(xp, choice, ids)")),
    _m("model_ties_highest", ROUTING, "among equal c the highest expert wins",
       MODEL_T + "test_tie_at_eighth_and_ninth_place_goes_to_the_lower_expert",
       ("return np.argmax(mask, axis=1) if xp is np", "return mask.shape[1] - 1 - np.argmax(mask[:, ::-1], axis=1) if xp is np")),
    _m("model_unscaled", ROUTING, "renormalize=False weights are s, not s * scale",
       MODEL_T + "test_weights_follow_pick_order_and_renormalize_flag",
       ("else mul_rn(picked, _broadcast(xp, scale[:, None], picked.shape))", "else picked")),
    # ---- the model's metadata
    _m("meta_limit_off_by_one", ROUTING, "a CTA's row limit one past its expert's last row",
       MODEL_T + "test_metadata_all_local_tile_4",
       ("_take_rows(xp, counts, owner))", "_take_rows(xp, counts, owner) + 1)")),
    _m("meta_foreign_route_zero", ROUTING, "a route to another rank's expert mapped to row 0, not -1",
       MODEL_T + "test_metadata_one_rank_of_four_experts_tile_3",
       ("xp.where(is_local, permuted, -1)", "xp.where(is_local, permuted, 0)")),
    _m("meta_padding_unwritten", ROUTING, "padding rows keep the fill instead of -1",
       MODEL_T + "test_metadata_one_rank_of_four_experts_tile_3",
       ("xp.where(padded_rows < total * tile_n, -1, fill)", "xp.where(padded_rows < total * tile_n, fill, fill)")),
    _m("meta_local_inclusive", ROUTING, "the expert just past the local range counted as local",
       MODEL_T + "test_metadata_one_rank_of_four_experts_tile_3",
       ("(local < num_local_experts[:, None])", "(local <= num_local_experts[:, None])")),
    # ---- the model's primitives (re-target after the primitives rewrite)
    _m("prim_log2e", PRIMITIVES, "sigmoid's log2(e) one ulp high", SAMPLE_T + "[sigmoid_f32-binades]",
       ("LOG2E = 0x3FB8AA3B", "LOG2E = 0x3FB8AA3C")),
    _m("prim_div_unscaled", PRIMITIVES, "div.full without its range scaling above 2^126",
       SAMPLE_T + "[div_full_f32-exponent_pairs]", ("_RANGE_HIGH = 2.0**126", "_RANGE_HIGH = 2.0**128")),
    _m("prim_common_log2e", PRIMITIVES, "the NumPy common path's -log2(e) one ulp high", SAMPLE_T + "[sigmoid_f32-binades]",
       ("_NEG_LOG2E = -float(np.int32(LOG2E).view(np.float32))", "_NEG_LOG2E = -float(np.int32(LOG2E + 1).view(np.float32))")),
    _m("prim_common_range_high", PRIMITIVES, "the NumPy common path taken up to t = 128, where div.full scales",
       COMMON_T, ("_COMMON_T_HIGH = 126.0", "_COMMON_T_HIGH = 128.0")),
    # ---- case files
    _m("casefile_word_count_unchecked", CASEFILE, "a short word list read without complaint",
       CASEFILE_T + "test_a_bad_file_is_refused_naming_what_is_wrong[short bias]",
       ("if sum(counts) != size:", "if sum(counts) > size:")),
    _m("casefile_runs_expanded_unbounded", CASEFILE, "a word list's runs expanded before their total is checked",
       CASEFILE_READ_T + "test_a_run_is_refused_before_it_is_expanded",
       ("    counts = _run_counts(tokens, size, field)\n",
        '    counts = [int(token.partition("*")[2] or 1) for token in tokens]\n'),
       ("    return np.repeat(np.array(words, dtype), counts)\n",
        "    values = np.repeat(np.array(words, dtype), counts)\n    if values.size != size:\n"
        '        raise CaseFileError(f"{field}: expected {size} words, got {values.size}")\n    return values\n')),
    _m("casefile_last_run_long", CASEFILE, "the last run of words written one word too long",
       CASEFILE_T + "test_runs_of_words_decode_to_their_counts[7*3 -1 0*2-6-want0]",
       ("counts = np.diff(np.concatenate([starts, [words.size]]))",
        "counts = np.diff(np.concatenate([starts, [words.size + 1]]))")),
    _m("casefile_group_keeps_first", CASEFILE, "a group's value read for its first implementation only",
       CASEFILE_T + "test_a_round_trip_keeps_every_bit_of_inputs_and_outputs",
       ('for name in entry["by"]:', 'for name in entry["by"][:1]:')),
    _m("casefile_scale_unwritten", CASEFILE, "the scale written as 1.0",
       CASEFILE_T + "test_a_round_trip_keeps_every_bit_of_inputs_and_outputs",
       ('"scale": f"{int(f32_bits(case.scale)):08x}"', '"scale": "3f800000"')),
    _m("casefile_missing_fields_unchecked", CASEFILE, "a recording that lost a field passes",
       CORPUS_T + "test_a_recording_that_lost_a_field_is_refused[metadata-cute]",
       ("            if (field != \"metadata\" or record.case.has_metadata) and (out is None or getattr(out, field) is None):",
        "            if False:")),
    _m("casefile_duplicate_keys_accepted", CASEFILE, "a key given twice in one object read as its last value",
       STRICT_T + "[duplicated_key-first]", ("        if key in obj:\n", "        if False:\n")),
    _m("casefile_byte_order_mark_skipped", CASEFILE, "a UTF-8 byte-order mark read past, as json.loads of bytes does",
       STRICT_T + "[byte_order_mark-first]",
       ("    if raw.startswith(codecs.BOM_UTF8):\n", "    if False:\n"),
       ('text = raw.decode("utf-8")', 'text = raw.decode("utf-8-sig")')),
    _m("casefile_floats_as_integers", CASEFILE, "1.0 read as an integer (jsonschema's own integer type)",
       STRICT_T + "[fraction_for_integer-first]",
       ('    cls = jsonschema.validators.extend(base, type_checker=strict)\n',
        '    cls = jsonschema.validators.extend(base, type_checker=base.TYPE_CHECKER)\n')),
    # ---- replay
    _m("replay_skips_recorded_metadata", REPLAY, "replay never compares recorded metadata",
       CORPUS_T + "test_one_changed_recorded_value_is_caught[metadata]",
       ("recorded = {name + RECORDED: out for name, out in record.outputs.items()}",
        "recorded = {name + RECORDED: type(out)(out.ids, out.weights, None) for name, out in record.outputs.items()}")),
    _m("replay_ignores_recordings", REPLAY, "replay compares only the live outputs",
       CORPUS_T + "test_replay_command_fails_on_a_changed_recorded_bit",
       ("disagreements({**live, **recorded}, reference=REFERENCE,", "disagreements(live, reference=REFERENCE,")),
    _m("replay_exit_zero", REPLAY, "replay exits 0 when something differs",
       CORPUS_T + "test_replay_command_fails_on_a_changed_recorded_bit",
       ("statuses.append(DIFFER if found else if_equal)", "statuses.append(if_equal)")),
    _m("replay_reads_incomplete_files", REPLAY, "replay reads a file that lost a recorded field",
       CORPUS_T + "test_a_recording_that_lost_a_field_is_refused[metadata-cute]",
       ("    missing = casefile.missing_fields(record, writes())\n", "    missing = []\n")),
    _m("replay_nothing_compared_agrees", REPLAY, "a case that compared nothing replays as AGREE",
       VACUOUS_T + "test_replay_of_a_case_with_nothing_to_compare_fails_saying_so",
       ("if_equal = AGREE if checked else NOTHING_COMPARED", "if_equal = AGREE")),
    # ---- runs that checked nothing (issue 20)
    _m("soak_nothing_under_test_runs", SOAK_CLI, "a soak with nothing under test runs (the model against itself)",
       VACUOUS_T + "test_a_soak_with_nothing_under_test_is_refused",
       ("        if REFERENCE not in (args.impl or ()):\n", "        if False:\n")),
    _m("soak_retires_the_newest_batch", SOAK_SCHEDULE, "the soak retires the newest batch in flight, not the oldest",
       SCHEDULE_T + "test_batches_that_finish_out_of_order_are_retired_in_order_with_the_serial_counts",
       ("        flight = self.in_flight.popleft()\n", "        flight = self.in_flight.pop()\n")),
    _m("soak_compares_before_the_model", SOAK_SCHEDULE, "the soak's comparison does not wait for the model's batch",
       SCHEDULE_T + "test_each_stage_waits_for_its_own_batch",
       ('            s.wait("implementations", modelled)\n            for name, got in',
        "            for name, got in")),
    _m("soak_outputs_shared_between_batches", SOAK_LAUNCHES, "a batch's outputs are the plan's static buffers, "
       "which the next batch overwrites", SCHEDULE_T + "test_a_batch_in_flight_keeps_its_own_outputs_while_later_batches_run",
       ("x.clone() if field in self.fields", "x if field in self.fields")),
    _m("soak_capture_under_the_collector", SOAK_GRAPHED, "graphs are captured with the cyclic collector free to "
       "run mid-capture", SCHEDULE_T + "test_a_capture_runs_after_the_cyclic_garbage_is_freed_and_with_the_collector_held_off",
       ("    gc.collect()\n    enabled = gc.isenabled()\n    gc.disable()\n", "    enabled = False\n")),
    _m("soak_compiled_model_unchecked", SOAK_SCHEDULE, "the compiled or graphed model and the graphed draw are never "
       "compared with the code as written", SCHEDULE_T + "test_a_compiled_model_that_differs_in_one_bit_stops_the_soak",
       ("        if differs:\n            raise ModelMismatch", "        if False:\n            raise ModelMismatch")),
    _m("soak_zero_rows_pass", SOAK_CLI, "a soak that verified no row passes",
       VACUOUS_T + "test_a_soak_that_verified_no_row_fails", ('    if rows == 0:\n', "    if False:\n")),
    _m("harness_run_no_mutant_passes", HARNESS_RUN, "a harness mutant run of no mutant passes",
       VACUOUS_T + "test_a_harness_mutant_run_of_no_mutant_fails",
       ('failures += [] if rows else ["no mutant ran: nothing was checked"]', "failures += []")),
    _m("mutants_no_mutant_passes", KERNEL_MUTANTS_CLI, "a kernel mutant run that probed no mutant passes",
       VACUOUS_T + "test_a_kernel_mutant_run_that_probed_no_mutant_fails",
       ('return any(row["tiers"] or', 'return True or any(row["tiers"] or')),
    _m("mutant_equivalent_by_ptx_alone", KERNEL_MUTANTS_GENERATED, "a kernel mutant that changes only what route "
       "launches judged equivalent from its PTX alone",
       GENERATED_T + "test_a_mutant_that_changes_only_what_route_launches_is_not_equivalent_by_its_digests",
       ('"differs": ptx != real["ptx_sha256"] or launches,', '"differs": ptx != real["ptx_sha256"],')),
    _m("variants_check_counts_nothing", BENCH_VARIANTS, "the kernel-variants check counts no differing call",
       VARIANTS_T + "test_the_check_counts_every_differing_call_and_every_raise",
       ('            if lines:\n                entry["differ"] += 1',
        '            if False:\n                entry["differ"] += 1')),
    _m("variants_nothing_compared_passes", BENCH_VARIANTS, "a kernel-variants run whose check compared nothing passes",
       VARIANTS_T + "test_a_run_whose_check_compared_nothing_fails",
       ("    if differ or unchecked or errors:", "    if differ or errors:")),
    # ---- the write guard: committed records only when the command line names them (issue 20)
    _m("harness_table_to_results", HARNESS_RUN, "the harness kill table written to the committed record by default",
       CLEAN_T + "test_default_forms_leave_git_status_clean",
       ('DEFAULT_OUT = REPO_ROOT / "reports" / "harness-mutants.json"', "DEFAULT_OUT = RESULTS")),
    _m("bench_verify_time_to_results", BENCH_CLI, "bench --time-verify writes the committed bench record by default",
       CLEAN_T + "test_the_benchs_default_outputs_are_reports",
       ('DEFAULT_VERIFY_OUT = REPO_ROOT / "reports" / "verify-time.json"',
        'DEFAULT_VERIFY_OUT = REPO_ROOT / "properties" / "results" / "bench.json"')),
    # ---- recorded corpus data
    _d("data_cute_metadata_dropped", "cute removed from the recorded metadata of every metadata case file",
       CORPUS_T + "test_every_recording_holds_every_field_its_implementation_writes", _drop_cute_metadata, 341),
    _d("data_triton_weights_dropped", "triton's weights removed from one case file",
       CORPUS_T + "test_every_recording_holds_every_field_its_implementation_writes", _drop_triton_weights_of_one, 1),
    _d("data_weight_bit", "one bit of one recorded weight flipped", REPLAYED, _flip_weight_bit, 1),
    _d("data_id", "one recorded id changed", REPLAYED, _change_one_id, 1),
    _d("data_metadata_element", "one recorded metadata element changed", REPLAYED, _change_one_metadata_element, 1),
    _d("data_recording_dropped", "one case file deleted",
       CORPUS_T + "test_corpus_holds_exactly_its_cases_of_every_generator", _drop_one_recording, 1),
    # ---- the invariant checker
    _m("inv_foreign_unchecked", INVARIANTS, "a foreign route's row not checked",
       INV_T + "[foreign route not -1]", ("if (e2p[~local] != PADDING).any():", "if False:")),
    _m("inv_token_unchecked", INVARIANTS, "a route's row not checked to hold its token",
       INV_T + "[row holds another token]",
       ("if (token_of_row[rows] != np.flatnonzero(local) // TOP_K).any():", "if False:")),
    _m("inv_padding_unchecked", INVARIANTS, "padding rows not checked",
       INV_T + "[padding row holds a token]", ("if (token_of_row[padding_rows] != PADDING).any():", "if False:")),
    _m("inv_num_ctas_unchecked", INVARIANTS, "the CTA count not checked",
       INV_T + "[one CTA too many]", ("if num_ctas != int(np.sum(-(-counts // tile))):", "if False:")),
    _m("inv_empty_cta_allowed", INVARIANTS, "a CTA limit at its first row (an empty CTA) accepted",
       INV_T + "[an empty CTA]",
       ("if ((limit <= starts) | (limit > starts + tile)).any():", "if (limit > starts + tile).any():")),
    _m("inv_cta_rows_unchecked", INVARIANTS, "a CTA's rows below its limit not checked to be its routes'",
       INV_T + "[a limit past the routes]",
       ("if (row_route[rows[valid]] < 0).any() or (row_route[rows[~valid]] >= 0).any():", "if False:")),
    _m("inv_cta_expert_unchecked", INVARIANTS, "a CTA's routes not checked to be its expert's",
       INV_T + "[CTAs 2 and 3 hold each other's routes]",
       ("elif (routes[row_route[rows[valid]]] != offset + batch[i]).any():", "elif False:")),
    _m("inv_order_unchecked", INVARIANTS, "token order within a CTA not checked",
       INV_T + "[tokens out of order]", ("elif (np.diff(token_of_row[rows[valid]]) <= 0).any() or (", "elif False and (")),
    _m("inv_untouched_unchecked", INVARIANTS, "elements past the written sizes not checked",
       INV_T + "[the guard written]", ('found += [f"{name} is written" for name, part in untouched.items() if (part != fill).any()]', "found += []")),
    # ---- the codegen checks
    _m("cg_float_problems_dropped", CHECKS, "the float check never reports",
       STATIC_T + "test_a_changed_float_emission_is_reported[IEEE division]",
       ("return [] if mismatch is None else [mismatch]", "return []")),
    _m("cg_float_trees_unchecked", CHECKS, "the float check compares opcode counts only",
       STATIC_T + "test_a_changed_float_emission_is_reported[operands swapped]", ("if mine != triton:", "if False:")),
    _m("cg_float_leaves_anonymous", FLOAT_OPS, "every leaf of the float trees one anonymous value again",
       (STATIC_T + "test_a_changed_float_emission_is_reported[picks summed in another order]",
        "tests/test_ptx_float_ops_cpu.py::test_a_sum_taken_in_another_order_changes_the_tree"),
       ("            result = names[operand]\n", "            result = LEAF\n")),
    _m("cg_load_placement_unchecked", CHECKS, "load placement around the wait not checked",
       STATIC_T + "test_a_misplaced_wait_is_reported[wait-after-1-loads]",
       ("if [(load.before_wait, load.after_wait) for load in pair] != [place] * 2:", "if False:")),
    _m("cg_branch_unchecked", CHECKS, "lane-dependent branches after the wait not reported",
       STATIC_T + "test_a_branch_after_the_wait_is_reported",
       ('for inst in flow.lane_dependent_branches_after_wait(variant["ptx"])]', "for inst in []]")),
    _m("cg_write_before_wait_emptied", CHECKS, "the global-write-before-the-wait check emptied",
       STATIC_T + "test_a_global_write_before_the_wait_is_reported[plain]",
       ('problems = [f"global write before the wait: {program.instructions[i]}" for i in _global_writes(program, before)]',
        "problems = []")),
    _m("cg_write_after_launch_unchecked", CHECKS, "writes after launch_dependents not reported",
       STATIC_T + "test_a_global_write_after_launch_dependents_is_reported",
       ("for i in _global_writes(program, flow.reachable(program, launch[0]))]", "for i in []]")),
    _m("cg_exit_unchecked", CHECKS, "an exit skipping launch_dependents not reported",
       STATIC_T + "test_an_exit_that_skips_launch_dependents_is_reported",
       ("if set(exits) & flow.reachable(", "if set() & flow.reachable(")),
    _m("cg_sass_ffma_unchecked", CHECKS, "FFMA in the SASS not reported",
       STATIC_T + "test_sass_without_its_wait_with_an_ffma_or_a_narrow_load_is_reported[ffma]",
       ('return problems + ([f"SASS has {len(ffma)} FFMA"] if ffma else [])', "return problems")),
    _m("cg_sass_two_waits", CHECKS, "two waits in the SASS accepted",
       STATIC_T + "test_sass_with_two_waits_is_reported",
       ('if opcodes.count("ACQBULK") != 1:', 'if opcodes.count("ACQBULK") < 1:')),
    _m("cg_sass_loads_unchecked", CHECKS, "the SASS's wide loads around the wait not checked",
       STATIC_T + "test_sass_without_its_wait_with_an_ffma_or_a_narrow_load_is_reported[narrow-load]",
       ("if loads != [WIDE_LOAD] * 2]", "if False]")),
    _m("cg_registers_unchecked", CHECKS, "the register limit not checked",
       STATIC_T + "test_spills_and_too_many_registers_are_reported[registers-256]",
       ('if usage["registers"] > MAX_REGISTERS:', "if False:")),
    _m("cg_local_memory_unchecked", CHECKS, "local memory not checked",
       STATIC_T + "test_spills_and_too_many_registers_are_reported[local_bytes-8]",
       ('for field in ("local_bytes", "stack_bytes")', 'for field in ("stack_bytes",)')),
    _m("cg_constants_unchecked", CHECKS, "routing's float constants not checked",
       STATIC_T + "test_a_wrong_constant_is_reported", ("if getattr(routing, name).bits != want:", "if False:")),
    # ---- the FTZ/DAZ guard
    _m("fpenv_daz_disabled", FPENV, "the DAZ branch of the guard disabled",
       "tests/test_fpenv.py::test_check_refuses_each_flush_mode_alone[daz_only]",
       ("if (tiny + tiny).view(np.uint32)[0] != 2:", "if False:")),
    _m("fpenv_ftz_disabled", FPENV, "the FTZ branch of the guard disabled",
       "tests/test_fpenv.py::test_check_refuses_each_flush_mode_alone[ftz_only]",
       ("if half.view(np.uint32)[0] != 0x00400000:", "if False:")),
    # ---- the gate's verdict
    _m("gate_ignores_failed_tests", GATE, "the verdict ignores failed tests when pytest exits 0",
       GATE_T + "test_a_failed_test_or_an_unnamed_skip_fails_the_verdict_whatever_pytest_returned",
       ("if failed:\n", "if False:\n")),
    _m("gate_unnamed_skips_accepted", GATE, "a skip without a named reason passes the gate",
       GATE_T + "test_a_failed_test_or_an_unnamed_skip_fails_the_verdict_whatever_pytest_returned",
       ('if summary["unnamed_skips"]:', "if False:")),
    _m("gate_any_skip_named", GATE, "every skip reason counted as a named (accepted) one",
       GATE_T + "test_only_gpu_and_build_skips_are_named",
       ('reason.startswith(name + ": ")', "True")),
    _m("gate_require_gpu_ignored", GATE, "VERIFY_REQUIRE_GPU=1 does not fail on GPU checks not run",
       GATE_T + "test_verdict_fails_on_gpu_gaps_only_when_required_and_on_a_missing_report",
       ('if summary["gpu_checks_not_run"]:', "if False:")),
    _m("gate_vacuous_pass", GATE, "a selection that ran no test passes the gate",
       GATE_T + "test_a_selection_that_ran_no_test_fails_and_says_so_last[all-skipped]",
       ("    if _ran_nothing(rc, summary):\n", "    if False:\n")),
    _m("gate_require_gpu_without_gpu", GATE, "VERIFY_REQUIRE_GPU=1 passes on a machine with no GPU",
       GATE_T + "test_require_gpu_fails_without_a_gpu_or_without_a_passed_gpu_check",
       ("        if gpu_reason is not None:\n            reasons.append", "        if False:\n            reasons.append")),
    _m("gate_require_gpu_no_gpu_check_passed", GATE, "VERIFY_REQUIRE_GPU=1 passes when no GPU check passed",
       GATE_T + "test_require_gpu_fails_without_a_gpu_or_without_a_passed_gpu_check",
       ('if not summary["gpu_checks_passed"]:', "if False:")),
    _m("progress_written_by_workers", PROGRESS, "every xdist worker writes its own partial count to the progress file",
       (GATE_PROGRESS_T + "test_only_the_controlling_process_writes_progress",
        GATE_PROGRESS_T + "test_under_xdist_the_counter_only_grows_to_the_tests_collected"),
       ('return hasattr(config, "workeroutput")', "return False")),
    # ---- plug-ins: the loader and the verdict (issue 21)
    _m("plugin_refusal_dropped", REGISTRY_PY, "a configured plug-in that cannot run is dropped in silence",
       PLUGINS_T + "test_verify_impl_configures_plugins_and_keeps_the_refused",
       ('                _configured["refused"][item.name] = item.reason\n', "                pass\n")),
    _m("plugin_raise_accepted", PLUGINS_PY, "a plug-in whose probe call raises is accepted",
       PLUGINS_T + "test_a_plugin_that_cannot_run_is_refused_in_one_line_naming_it[raises]",
       ("        raise NotRun(name, f\"{doing + ' ' if doing else ''}raised {type(exc).__name__}: {_first_line(exc)}\") "
        "from exc", "        return")),
    _m("plugin_replaced_tensor_accepted", PLUGINS_PY, "a plug-in that resizes or retypes its outputs is accepted",
       (PLUGINS_T + "test_a_plugin_that_cannot_run_is_refused_in_one_line_naming_it[wrong shape]",
        PLUGINS_T + "test_a_plugin_that_cannot_run_is_refused_in_one_line_naming_it[wrong dtype]"),
       ("        if (_shown(now), now.data_ptr()) != (shown, pointer):", "        if False:")),
    _m("verdict_differing_uncounted", VERDICT_PY, "the verdict counts no differing row",
       PLUGINS_T + "test_the_verdict_counts_every_differing_row_and_weight",
       ("            tally.differing[key(name, names[i], field)] += int(n)",
        "            tally.differing[key(name, names[i], field)] += 0")),
    _m("verdict_one_ulp_as_signed_zero", VERDICT_PY, "a weight one ulp off counted in the signed-zero bucket",
       (PLUGINS_T + "test_the_verdict_counts_every_differing_row_and_weight",
        PLUGINS_T + "test_the_ulp_buckets_of_hand_made_weights"),
       ("torch.where(distance < 4, distance + 1, exponent + 2)", "torch.where(distance < 4, distance, exponent + 2)")),
)

# The issue's four survivors of its first attempt (commit 5a4eedc): CI runs them live.
ISSUE_SURVIVORS = ("data_cute_metadata_dropped", "replay_skips_recorded_metadata", "cg_write_before_wait_emptied",
                   "fpenv_daz_disabled")


def apply(mutant, root):
    """Apply ``mutant`` to the tree at ``root`` (a copy); MutantEditError when an edit does not apply exactly
    once or a data change does not change the files it declares."""
    for path, old, new in mutant.edits:
        file = Path(root) / path
        file.write_text(replace_once(file.read_text(), old, new, f"harness mutant {mutant.name}: its edit of {path}"))
    if mutant.data is not None:
        changed = mutant.data(Path(root))
        if changed != mutant.files:
            raise MutantEditError(f"harness mutant {mutant.name}: changed {changed} files, declared {mutant.files}")


def check_catalog(root, mutants=CATALOG):
    """Every name unique, every mutant with intended killers, every source edit applying exactly once to the
    files under ``root`` (data changes are checked by ``apply`` on a copy)."""
    names = [m.name for m in mutants]
    if len(set(names)) != len(names):
        raise MutantEditError(f"duplicate harness mutant names in {names}")
    texts = {}
    for mutant in mutants:
        if not mutant.killers or not all("::" in k for k in mutant.killers):
            raise MutantEditError(f"harness mutant {mutant.name}: killers must be pytest node ids")
        for path, old, new in mutant.edits:
            texts.setdefault(path, (Path(root) / path).read_text())
            replace_once(texts[path], old, new, f"harness mutant {mutant.name}: its edit of {path}")
