"""The soak engine: batched differential runs of every implementation against the model on torch tensors.
``python -m properties.soak`` (make soak); __main__.py holds the options.

    __main__.py  the command line: arguments, the run or --bench, the summary, the verdicts, the exit status
    loop.py      the loop over batches on each rank, a disagreement minimised into a case file, the summary
    plan.py      which batch is what: batch i of seed s a pure function of (s, i) and the Space
    bulk.py      the catalog's edge cases drawn in bulk with torch on the device
    graphed.py   a plan's draw and model replayed from CUDA graphs
    impls.py     the reference (the model on the device, compiled where it can be) and BatchOutputs
    launches.py  any implementation of the registry over a batch: one call per problem, graph branches
    schedule.py  batches in flight: each stage on its own stream, retired in batch order
    compare.py   the bitwise comparison on the device and the cross-check against the NumPy model on the CPU
    verdict.py   per implementation, family and field: rows checked and differing, ulp buckets
    summary.py   the counts (mergeable across ranks and resumed runs), the progress bar, the summary file
    dist.py      one rank per GPU through torch.distributed
    bench.py     --bench: rows/s per implementation, variant and b, and each stage alone
    table.py     the results README's rate table from the committed --bench records
"""
