"""The deep tests: the tests that leave the default gate (`make verify`) for `make verify-deep`, each with what it
catches and what still catches that by default, or why the deep tests alone are enough.

Two kinds. DEEP: the hand-written mutants' CPU tiers, the long sweeps and end-to-end runs whose catch a default test still makes;
they leave `make test` too. SELF_TESTS: the harness's slow end-to-end self-tests (its commands run in
subprocesses on the model or a planted fault, never on the kernel, so no kernel change can change their outcome);
`make test` (CI, every commit) still runs them, the gate a kernel engineer runs before each commit does not.

conftest.py marks every test named here ``deep`` and each self-test also ``selftest`` (an entry is a test id, a
test function with all its parameters, or a test file with all its tests), so this list is the one place a test
leaves the default gate; tests/test_depths_cpu.py checks that each entry names a test that exists, that the
markers select exactly these, and that the README's tables are this list.

    python -m properties.tools.depths     # the README's table, in Markdown
"""

import sys
from dataclasses import dataclass

from common.args import OneLineParser

DEEP_MARKER, SELF_TEST_MARKER = "deep", "selftest"
# `make test`'s marker expression (the Makefile spells it; a CPU test holds them equal): default tests and self-tests
MAKE_TEST = f"not {DEEP_MARKER} or {SELF_TEST_MARKER}"
EVIDENCE_ALONE = ("the evidence record alone: a mutant is a wrong kernel that every default check must catch, and "
                    "the gate reports whether the committed evidence record was made for this tree")


@dataclass(frozen=True)
class Deep:
    """``test``: a pytest node id without parameters (all of them), with one, or a test file (all its tests);
    ``catches``: what it finds; ``still``: the default test that still finds it, or why the deep tests alone are
    enough."""

    test: str
    catches: str
    still: str

    def names(self, nodeid):
        """True when this entry names test ``nodeid``."""
        return nodeid == self.test or nodeid.startswith(self.test + ("[" if "::" in self.test else "::"))


DEEP = (
    Deep("tests/test_mutants_cpu.py::test_the_static_tier_kills",
         "a codegen mutant that the static checks miss, on any CPU", EVIDENCE_ALONE),
    Deep("tests/test_mutants_cpu.py::test_the_contract_cpu_tier_kills",
         "a contract mutant that the contract property with CPU tensors misses", EVIDENCE_ALONE),
    Deep("tests/test_mutants_cpu.py::test_the_real_kernel_passes_the_static_tier",
         "a real kernel failing the mutants' static probe",
         "tests/test_kernel_static_cpu.py checks the real kernel's every variant directly"),
    Deep("tests/test_mutants_cpu.py::test_a_mutant_of_what_route_launches_keeps_the_ptx_but_not_the_launch_digest",
         "the probe's launch digest missing what route launches (compiled for real)",
         "tests/test_mutants_generated_cpu.py::test_a_mutant_that_changes_only_what_route_launches_is_not_equivalent_by_its_digests"),
    Deep("tests/test_mutants_cpu.py::test_the_real_kernel_passes_the_contract_cpu_tier",
         "a real contract failing the mutants' contract probe",
         "tests/test_contract_property_cpu.py runs the same property on the real contract"),
    Deep("tests/test_mutants_generated_cpu.py::test_a_pure_refactor_keeps_the_kernels_ptx_and_a_mutants_static_verdict",
         "a refactor of a kernel copy that changes its PTX or a generated mutant's static verdict (compiles both)",
         "tests/test_mutants_generated_cpu.py::test_a_pure_refactor_keeps_every_mutants_name_and_edit"),
    Deep("tests/test_mutants_generated_cpu.py::test_every_mutant_changes_the_syntax_tree_and_edits_its_segment_alone",
         "a generated mutant that is a no-op or edits beyond its segment (every mutant's file parsed again)",
         "deep alone: the generated set is the deep tests' own input; its names, order and selection are checked by "
         "default"),
    Deep("tests/test_clean_tree_cpu.py::test_default_forms_leave_git_status_clean",
         "a command whose default form rewrites a tracked file (every command, run in a clone)",
         "deep alone: it exercises the commands' output paths, not routing bits; CI's harness mutant "
         "harness_table_to_results runs it"),
    Deep("tests/test_readme_plugin_cpu.py::test_the_section_is_short_and_its_kernel_is_caught_and_replayed",
         "the README's plug-in walk-through failing as written (a soak and a replay in subprocesses)",
         "tests/test_plugins_cpu.py checks the plug-in registry, soak and replay in process"),
    Deep("tests/test_harness_mutants_cpu.py::test_the_issues_four_survivors_are_killed_live",
         "four harness mutants that once survived, run live",
         "CI's make harness-mutants runs every harness mutant against its intended tests"),
    Deep("tests/test_gate_cpu.py::test_gate_end_to_end_counts_named_gpu_skips_and_require_gpu_fails_on_them",
         "the gate's counts and VERIFY_REQUIRE_GPU end to end (two gates in subprocesses)",
         "tests/test_gate_cpu.py's verdict tests check the same rules on stated summaries"),
    Deep("tests/test_gate_cpu.py::test_require_gpu_on_a_cpu_fails_even_when_every_selected_test_passed",
         "VERIFY_REQUIRE_GPU passing a CPU run end to end",
         "tests/test_gate_cpu.py::test_require_gpu_fails_without_a_gpu_or_without_a_passed_gpu_check"),
    *(Deep(f"tests/test_flashinfer_peer_cpu.py::{test}", f"the benchmark peer's library, built with nvcc: {what}",
           "deep alone: the peer is the benchmark's, no oracle, and the bench checks its outputs before timing it")
      for test, what in (("test_library_holds_only_the_block_and_dyn_block_instances", "an instance too many"),
                         ("test_library_links_every_flashinfer_symbol_it_uses", "a symbol left unlinked"),
                         ("test_entry_refuses_bad_arguments_before_touching_cuda", "an entry that takes bad arguments"))),
    Deep("tests/test_report_cpu.py::test_the_viewer_opens_every_example_and_mutant_case",
         "a committed case file the viewer cannot draw",
         "tests/test_report_cpu.py::test_the_case_page_marks_exactly_the_elements_that_differ"),
    Deep("tests/test_soak_cpu.py::test_a_planted_fault_is_caught_within_a_million_rows_and_its_case_file_replays",
         "a soak that misses a tie fault within a million rows",
         "tests/test_soak_cpu.py::test_a_metadata_fault_is_caught_and_saved_whole_and_its_case_file_replays"),
    Deep("tests/test_soak_interrupt_gpu.py::test_a_kernel_soak_interrupted_resumed_killed_and_resumed_verifies_every_batch_once",
         "a kernel soak on the GPU that loses or repeats a batch across SIGINT, --resume, SIGKILL and --resume (minutes: "
         "five soak processes, each compiling the kernel)",
         "tests/test_soak_interrupt_cpu.py runs the same sequence with the model on the CPU (make test)"),
    Deep("tests/test_soak_interrupt_gpu.py::test_a_signal_ends_a_kernel_soak_in_seconds_with_one_line_and_a_whole_summary",
         "a kernel soak on the GPU that a signal does not end in seconds with a whole summary",
         "tests/test_soak_interrupt_cpu.py::test_a_signal_ends_the_soak_in_seconds_with_one_line_and_a_whole_summary "
         "(make test)"),
    Deep("tests/test_flashinfer_oracle_gpu.py::test_flashinfer_matches_numpy_model",
         "FlashInfer's metadata and the model's differing at any of tiles 1..256 over fixed id sets and rank ranges "
         "(about 9,000 library launches per b; no kernel runs)",
         "tests/test_cross_oracles_gpu.py::test_kernel_metadata_equals_flashinfer_fed_the_kernels_ids and the "
         "kernel-against-model metadata tests: a wrong oracle or model breaks a kernel comparison"),
    Deep("tests/test_soak_gpu.py",
         "the soak's GPU machinery: its compiled model, graphed draws, pipelined batches and planted faults (minutes "
         "of compiles and batches)",
         "deep alone: they test the soak, which runs in make verify-nightly; tests/test_soak_cpu.py checks the "
         "soak's counts, faults and case files by default"),
    Deep("tests/test_flashinfer_model_gpu.py::test_the_library_equals_its_model_on_every_generator",
         "the benchmark peer (FlashInfer's fused routing) differing from its model on a drawn row",
         "deep alone: the peer is the benchmark's, no oracle; "
         "test_the_library_equals_its_model_on_the_bench_inputs checks it on the inputs the bench times"),
    Deep("tests/test_flashinfer_model_gpu.py::test_the_model_on_cuda_tensors_equals_its_numpy_form",
         "the soak's form of the model (CUDA tensors, as written and compiled) differing from the NumPy model",
         "deep alone: only the soak runs that form, in make verify-nightly"),
    Deep("tests/test_soak_cpu.py::test_two_gloo_ranks_share_the_work_and_gather_counts_and_failures",
         "two soak ranks that do not share the work or gather their counts (torch.distributed, gloo)",
         "deep alone: the soak's single-rank counts are checked by default; ranks are for many-GPU hosts"),
    Deep("tests/test_bench_speed_gpu.py",
         "a speed check that cannot fail (it passes the planted kernel, which keeps every bit and spins 2 µs more) "
         "or fails the real kernel measured again; bench rounds that make no section the check reads",
         "deep alone: the speed check itself runs in make verify-deep alone (the gate's step after the deep tests); "
         "tests/test_bench_speed_cpu.py checks its decision on stated figures by default"),
    Deep("tests/test_memcheck_gpu.py",
         "an access out of bounds that no output shows (a store one word past a shared array), under memcheck",
         "deep alone: no output comparison can see it; the generated mutants' differential tier runs memcheck on "
         "every mutant whose outputs all match"),
)

SELF_TEST = "make test (CI, every commit); deep for the gate: it never runs the kernel"
SELF_TESTS = tuple(Deep(test, catches, SELF_TEST) for test, catches in (
    ("tests/test_cli_arguments_cpu.py", "a command line that answers a bad argument with a traceback, or after work"),
    ("tests/test_casefile_cpu.py::test_replay_exit_codes_are_distinct", "replay's exit codes run together"),
    ("tests/test_casefile_cpu.py::test_replay_refuses_each_corrupt_file_with_one_line_and_exit_2",
     "replay reading a corrupt case file"),
    ("tests/test_casefile_not_run_cpu.py", "replay calling an implementation that cannot run unreadable"),
    ("tests/test_casefile_strict_cpu.py::test_a_key_given_twice_is_refused_by_each_command_as_run",
     "a command taking a case file with a key given twice"),
    ("tests/test_depths_cpu.py::test_the_markers_select_exactly_the_listed_tests_and_each_entry_names_one",
     "a deep or self-test entry naming no test, or a marker selecting another"),
    ("tests/test_gate_cpu.py::test_a_gate_whose_selection_ran_no_test_fails_and_does_not_say_every_check_ran",
     "a gate that ran nothing passing"),
    ("tests/test_gate_cpu.py::test_bad_options_give_one_line_and_exit_2_before_anything_is_written",
     "the gate taking a bad option, or writing before refusing it"),
    ("tests/test_gate_cpu.py::test_the_long_tests_are_collected_first_and_the_workers_steal_work",
     "the gate's long tests collected last"),
    ("tests/test_gate_cpu.py::test_a_module_skipped_at_collection_is_counted_as_a_skip",
     "a module skipped at collection not counted"),
    ("tests/test_gate_progress_cpu.py", "a gate that goes quiet, or hides a failure until its end"),
    ("tests/test_gate_promises_cpu.py", "the gate's and make test's promises (exit codes, variables, reports) broken"),
    ("tests/test_interrupts_cpu.py", "a command that a signal does not end in seconds with one line"),
    ("tests/test_plugins_cpu.py::test_a_cpu_plugin_soaks_and_its_case_file_replays_against_it_by_name",
     "a plug-in that cannot be soaked and replayed by name"),
    ("tests/test_plugins_cpu.py::test_the_verdict_counts_every_differing_row_and_weight",
     "a plug-in's verdict miscounting rows or weights"),
    ("tests/test_product_cpu.py::test_mutants_cli_needs_cuda_for_the_gpu_tier_and_replay_has_help",
     "the mutants command running its GPU tier without CUDA"),
    ("tests/test_product_cpu.py::test_mutants_cli_misuse_is_one_line_and_exit_2", "the mutants command misused"),
    ("tests/test_soak_interrupt_cpu.py", "a soak that loses or repeats a batch across signals and --resume"),
    ("tests/test_soak_schedule_cpu.py", "the soak's pipeline retiring batches out of order or miscounting"),
))


def entry(nodeid):
    """The deep test or self-test entry naming ``nodeid``, or None (a default test)."""
    return next((e for e in DEEP + SELF_TESTS if e.names(nodeid)), None)


def is_deep(nodeid):
    """True when test ``nodeid`` (with or without parameters) leaves the default gate."""
    return entry(nodeid) is not None


def is_self_test(nodeid):
    """True when test ``nodeid`` is one of the harness's slow self-tests (make test still runs it)."""
    return any(e.names(nodeid) for e in SELF_TESTS)


def table():
    """The deep tests as a Markdown table (test, what it catches, what still catches it), then the self-tests as
    one paragraph (test: what it catches)."""
    lines = ["| deep test | what it catches | still caught by default, or why deep alone |", "|---|---|---|"]
    lines += [f"| {_cell(d.test)} | {d.catches} | {d.still} |" for d in DEEP]
    lines += ["", f"The harness's slow self-tests ({SELF_TEST}): "
              + "; ".join(f"{_cell(d.test)}: {d.catches}" for d in SELF_TESTS) + "."]
    return "\n".join(lines)


def _cell(test):
    """A table's test cell: `name` (file), or the file alone for a whole file."""
    path, _, name = test.partition("::")
    return f"`{name}` ({path.removeprefix('tests/')})" if name else f"every test of {path.removeprefix('tests/')}"


def main(argv=None):
    """Print the table; no options (one line and exit 2 for any)."""
    OneLineParser(prog="python -m properties.tools.depths", description=__doc__).parse_args(argv)
    print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
