"""The harness, one room per concern; a room imports only the rooms listed before it (tests/test_layers_cpu.py
holds the floors):

    engine/    one case type, the implementations' interface and registry, poisoned buffers, the bitwise
               comparison, case files, float32 bit patterns, the metadata invariants
    inputs/    what the harness draws: the edge-case catalog, Hypothesis strategies, adversarial row families
    codegen/   the kernel's static checks on its PTX and SASS
    bench/, mutants/, soak/   the benchmark, the mutant catalogs, the many-rows soak
    tools/     make verify's gate, the smoke run, the offline bundle; tools/args.py, every command line's
               parser, stands below every room
    report/    the pages a person reads instead of JSON (it reads what the others wrote)
    results/   measured data (in the repository, not in the wheel)

and the three commands a user runs on case files: ``python -m properties.replay`` (replay.py),
``python -m properties.view`` (view.py) and ``python -m properties.corpus`` (corpus.py).
"""
