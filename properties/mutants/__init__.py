"""Mutants that the checks must kill. Of the kernel, generated from its code (`make evidence`, `make
mutants-generated`): generate.py (the operators at every site), catalog.py (the few hand-written edits no operator
makes), prefilter.py (the CPU prefilter's worker: coverage, digests, the static tier), runner.py (a probe in its own
process, and the replay of saved cases), probe.py (one kernel through one tier), generated.py (the run and the
score), refresh.py (what a refresh reruns), freshness.py (the evidence record and its freshness), equivalents.py
(the mutants no digest can tell, each with its reason), __main__.py (the CLI).
Of the harness itself (`make harness-mutants`): harness.py (the catalog), harness_run.py (each mutant against the
test meant to catch it), attribution.py (how each test ended, so a kill is attributed), mutmut_report.py (the periodic mutmut survivors)."""
