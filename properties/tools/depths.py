"""The deep tests: the tests that run in `make verify-deep` alone, each with what it catches and what still
catches that in the default gate (`make verify`, `make test`), or why the deep tests alone are enough.

conftest.py marks every test named here ``deep`` (a test id, or a test function with all its parameters), so this
list is the one place a test leaves the default gate; tests/test_depths_cpu.py checks that each entry names a
test that exists and that the README's table is this list.

    python -m properties.tools.depths     # the README's table, in Markdown
"""

import sys
from dataclasses import dataclass

from oracles.args import OneLineParser

KILL_TABLE_ALONE = ("the kill table alone: a mutant is a wrong kernel that every default check must catch, and the "
                    "gate reports whether the committed kill table was made for this tree")


@dataclass(frozen=True)
class Deep:
    """``test``: a pytest node id without parameters (all of them) or with one; ``catches``: what it finds;
    ``still``: the default test that still finds it, or why the deep tests alone are enough."""

    test: str
    catches: str
    still: str


DEEP = (
    Deep("tests/test_mutants_gpu.py::test_every_mutant_is_killed_and_the_real_kernel_passes",
         "a kernel or contract mutant that no tier kills on the GPU; writes the kill table", KILL_TABLE_ALONE),
    Deep("tests/test_mutants_cpu.py::test_the_static_tier_kills",
         "a codegen mutant that the static checks miss, on any CPU", KILL_TABLE_ALONE),
    Deep("tests/test_mutants_cpu.py::test_the_contract_cpu_tier_kills",
         "a contract mutant that the contract property with CPU tensors misses", KILL_TABLE_ALONE),
    Deep("tests/test_mutants_cpu.py::test_the_real_kernel_passes_the_static_tier_and_the_equivalent_edits_escape_it",
         "a real kernel failing the mutants' static probe; an equivalent edit that stopped being one",
         "tests/test_kernel_static_cpu.py checks the real kernel's every variant directly"),
    Deep("tests/test_mutants_cpu.py::test_a_mutant_of_what_route_launches_keeps_the_ptx_but_is_not_equivalent",
         "the kill table's equivalence rule forgetting what route launches (compiled for real)",
         "tests/test_mutants_cpu.py's verdict tests check the rule on stated outcomes"),
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
         "tests/test_soak_interrupt_cpu.py runs the same sequence with the model on the CPU"),
    Deep("tests/test_soak_interrupt_gpu.py::test_a_signal_ends_a_kernel_soak_in_seconds_with_one_line_and_a_whole_summary",
         "a kernel soak on the GPU that a signal does not end in seconds with a whole summary",
         "tests/test_soak_interrupt_cpu.py::test_a_signal_ends_the_soak_in_seconds_with_one_line_and_a_whole_summary"),
    Deep("tests/test_soak_cpu.py::test_two_gloo_ranks_share_the_work_and_gather_counts_and_failures",
         "two soak ranks that do not share the work or gather their counts (torch.distributed, gloo)",
         "deep alone: the soak's single-rank counts are checked by default; ranks are for many-GPU hosts"),
)


def table():
    """The deep tests as a Markdown table: test, what it catches, what still catches it by default."""
    lines = ["| deep test | what it catches | still caught by default, or why deep alone |", "|---|---|---|"]
    lines += [f"| `{d.test.split('::')[1]}` ({d.test.split('::')[0].removeprefix('tests/')}) | {d.catches} | {d.still} |"
              for d in DEEP]
    return "\n".join(lines)


def is_deep(nodeid):
    """True when test ``nodeid`` (with or without parameters) is one of DEEP's."""
    return any(nodeid == d.test or nodeid.startswith(d.test + "[") for d in DEEP)


def main(argv=None):
    """Print the table; no options (one line and exit 2 for any)."""
    OneLineParser(prog="python -m properties.tools.depths", description=__doc__).parse_args(argv)
    print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
