"""Mutants that the checks must kill. Of the kernel (`make verify`): catalog.py (the edits), runner.py (every probe,
the verdicts and the report), probe.py (one kernel through one tier, in its own process), __main__.py (the CLI).
Generated from the kernel's code (`make mutants-generated`): generate.py (the operators at every site), prefilter.py
(the CPU prefilter's worker: coverage, digests, the static tier), generated.py (the run and the score),
equivalents.py (the mutants no digest can tell, each with its reason).
Of the harness itself (`make harness-mutants`): harness.py (the catalog), harness_run.py (each mutant against the
test meant to catch it), attribution.py (how each test ended, so a kill is attributed), mutmut_report.py (the periodic mutmut survivors)."""
