"""Mutants that the checks must kill. Of the kernel (`make verify`): catalog.py (the edits), runner.py (every probe,
the verdicts and the report), probe.py (one kernel through one tier, in its own process), __main__.py (the CLI).
Of the harness itself (`make harness-mutants`): harness.py (the catalog), harness_run.py (each mutant against the
test meant to catch it), attribution.py (how each test ended, so a kill is attributed), mutmut_report.py (the periodic mutmut survivors)."""
