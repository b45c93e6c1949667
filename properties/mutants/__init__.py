"""Mutants of the kernel that `make verify` must kill: catalog.py (the edits), runner.py (every probe, the
verdicts and the report), probe.py (one kernel through one tier, in its own process), __main__.py (the CLI)."""
