"""The bottom floor, below the kernel's oracles and the harness: what every command line and record shares and
nothing here routes a token. Standard library (and, where named, numpy, torch and jsonschema) only.

    args.py            the one-line argument parser and the argument types every command takes
    records.py         a record read against its JSON schema: one line naming the file and the field
    provenance.py      the record of where a run ran: GPU, driver, packages, commit, date, host
    fpenv.py           the CPU's floating-point environment checked at start-up (no FTZ, no DAZ)
    interrupts.py      SIGINT and SIGTERM for the command lines: one line, exit 128 + the signal
    markdown_block.py  a generated block of a Markdown file, rewritten in place by --update-readme
    cuda_tools.py      where the CUDA toolkit's command-line tools are (compute-sanitizer, ncu)
"""
