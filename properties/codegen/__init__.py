"""The kernel's codegen contract, checked statically on its PTX and SASS (no GPU): checks.py (the checks, also
run by the mutant probe on edited copies) and listing.py (``python -m properties.codegen.listing``); and
memcheck.py, the one check here that runs the kernel: every access in bounds under compute-sanitizer."""
