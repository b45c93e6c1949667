"""The one comparison engine: one way to run a routing case and compare its outputs, bit for bit.

    cases.py            RoutingCase (the inputs of one call) and Outputs (what one implementation wrote)
    poison.py           the poison every output buffer starts from
    implementations.py  the registry: model, triton, cute, flashinfer, broken; each says why it cannot run
    device.py           the kernel through poisoned buffers larger than its contract (GPU)
    compare.py          the bitwise comparison, its one-line report, check_case (saves a disagreement)
    casefile.py         the case-file writer and reader (corpora/README.md)
"""
