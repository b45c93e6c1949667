"""The harness, one room per concern, on floors: a room imports only the rooms of the floors before its own
(tests/test_layers_cpu.py holds them and reads every import).

    engine/                    one case type, the implementations' interface and registry, poisoned buffers,
                               the bitwise comparison, case files, float32 bit patterns, the metadata invariants
    inputs/, codegen/,         what the harness draws (the edge-case catalog, Hypothesis strategies, adversarial
    contract/                  row families); the kernel's static checks on its PTX and SASS; route's contract
                               stated on its own, its calls at every clause's edge, the property
    bench/, mutants/, soak/    the benchmark, the mutant catalogs, the many-rows soak
    tools/                     make verify's gate and its depths, the smoke run, the offline bundle, the
                               Hypothesis profiles (every command line's parser is common/args.py)
    report/                    the pages a person reads instead of JSON, from what the others wrote, and the
                               index of results/ made from its records
    replay.py, view.py,        the commands a user runs on case files: python -m properties.replay,
    corpus.py                  python -m properties.view, python -m properties.corpus

results/ holds measured data (in the repository, not in the wheel).
"""
