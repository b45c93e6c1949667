"""What the harness draws: the routing cases every check runs on.

    edge_cases.py  the catalog of edge-case names, shared by the two kinds of input below
    draws.py       the parameters and values a case draws (float32 bit patterns, b, tiles, local ranges, scale)
    strategies.py  one Hypothesis strategy of RoutingCase per edge case (GENERATORS), for the property tests
                   and the regression corpus
    families.py    fixed-seed adversarial rows per edge case, for the GPU tests, the smoke run and the mutants
"""
