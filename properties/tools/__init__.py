"""Entry points around the harness: gate.py (`make verify`), args.py (the CLIs' one-line usage errors),
gpu_groups.py (the gate's workers spread over GPUs), order.py (the long tests dealt over the workers), profiles.py (the Hypothesis profiles), progress.py (the
gate's progress file: tests done, failures as they happen), smoke.py (the first run on a GPU), bundle.py (the
offline bundle for GPU runners without package access)."""
