"""`make bench`: the kernel against the Triton and FlashInfer routing kernels and PyTorch eager, on a GPU.

    cli.py        the run and the command line (``python -m properties.bench``)
    problem.py    inputs per b, every variant's buffers, launches and output check (through the engine)
    timing.py     CUDA-graph timing, the PDL chain, the eager call and its parts, binary resources, the Recorder
    host_clock.py host time per call: repeated means of calls back to back, and their median
    floor.py      the floor under a launch issued from Python: an empty kernel through ctypes into the driver
    ncu.py        the Nsight Compute pass
    harness.py    the harness's own throughput and `make verify`'s wall time
    results_file.py  the results file's schema, the targets and the README tables (no GPU)
    breakdown.py  where the kernel's time goes: the kernel cut after each phase, each cut timed
    variants.py   copies of kernel/routing.py with a change, checked against the model and timed beside the kernel
    record_cli.py the command line of those two: a record to write (GPU) or a record's table to print
"""
