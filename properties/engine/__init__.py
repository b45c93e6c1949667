"""The one comparison engine: one way to run a routing case and compare its outputs, bit for bit.

    floats.py           float32 bit patterns: conversions, the format's named edges, ulp distance
    cases.py            RoutingCase (the inputs of one call) and Outputs (what one implementation wrote)
    poison.py           the poison every output buffer starts from
    interface.py        the one interface of every implementation: the kernel's route signature, a Declaration
    builtins.py         the harness's own: model, triton, cute, flashinfer, the planted faults
    plugins.py          implementations from outside: --impl NAME=MODULE:ATTR, VERIFY_IMPL, entry points
    implementations.py  the one registry of both, per case and per batch (properties/soak)
    buffers.py          one call's poisoned tensors and the per-case path (case -> Outputs)
    device.py           the kernel through buffers larger than its contract, for the kernel's own tests (GPU)
    compare.py          the bitwise comparison and its one-line report
    check.py            check_case: a property's check of one case, saving a disagreement
    casefile.py         the case-file writer and reader (corpora/README.md)
    invariants.py       what any correct metadata satisfies, stated from the layout alone (no second
                        implementation to compare with)
"""
