"""Entry points around the harness: gate.py (`make verify`), smoke.py (the first run on a GPU), bundle.py (the
offline bundle for GPU runners without package access)."""
