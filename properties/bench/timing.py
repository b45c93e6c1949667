"""Timing on the GPU: each variant captured in a CUDA graph of back-to-back launches, its outputs verified
after one replay, then timed with CUDA events; the PDL chain behind a producer kernel; each kernel's binary
resources. Every measurement goes through a Recorder, which keeps its result or its error."""

import sys
import traceback

import torch
import triton
import triton.language as tl

from kernel import contract, routing
from oracles.flashinfer_routing import build, fused_peer
from oracles.ptx.sass import binary_resource_usage, resource_usage
from oracles.triton_routing import launch
from properties.bench.host_clock import means_us, median
from properties.bench.problem import SCALE
from properties.bench.results_file import INFORMATION_VARIANTS, VARIANT_NAMES, summarize
from properties.codegen import checks
from properties.engine import device

WARMUP_REPLAYS = 3


def error_line(exc):
    """An exception as one line for the results file."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:500]


class Recorder:
    """Runs measurements, keeping each result or its error; the run goes on either way."""

    def __init__(self):
        self.errors = []

    def attempt(self, what, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - every failure is recorded, none aborts the run
            self.errors.append({"what": what, "error": error_line(exc), "trace": traceback.format_exc()[-2000:]})
            print(f"  {what}: {error_line(exc)}", file=sys.stderr)
            return {"error": error_line(exc)}


@triton.jit
def _produce(src, dst, n, BLOCK: tl.constexpr):
    """Let dependents launch, then copy n 32-bit words src -> dst (stands in for the router GEMM)."""
    tl.extra.cuda.gdc_launch_dependents()
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(dst + offsets, tl.load(src + offsets, mask=mask), mask=mask)


def produce(src, dst):
    """Enqueue the producer: dst <- src (32-bit words of same-sized contiguous tensors)."""
    n = dst.numel()
    _produce[(1,)](src.view(torch.int32), dst.view(torch.int32), n, BLOCK=triton.next_power_of_2(n), num_warps=4)


def capture(fn, iterations):
    """A CUDA graph of ``iterations`` back-to-back calls of ``fn`` (called once eagerly first)."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(iterations):
            fn()
    torch.cuda.synchronize()
    return graph


def time_graph(graph, iterations, repetitions):
    """Per-launch µs of each of ``repetitions`` timed replays (after WARMUP_REPLAYS untimed ones). Each
    timed replay is queued behind an untimed one, so the GPU is busy when its start event passes and the
    host's submission of the graph is not timed."""
    for _ in range(WARMUP_REPLAYS):
        graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(repetitions):
        graph.replay()
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0 / iterations)
    return samples


def measure(problem, name, fn, cfg, verify, mode):
    """Capture, verify the graph's outputs once (into verify[mode]), time: a summary, or an error on a
    mismatch."""
    graph = capture(fn, cfg.iterations)
    try:
        problem.poison(name)
        graph.replay()
        lines = problem.mismatches(name)
        verify[mode] = "; ".join(lines[:3]) if lines else "ok"
        if lines:
            return {"error": "outputs wrong after replay: " + verify[mode]}
        return summarize(time_graph(graph, cfg.iterations, cfg.repetitions))
    finally:
        graph.reset()


def bench_problem(problem, cfg, rec):
    """{"graph", "pdl_chain", "producer", "verify", "information"} of every variant for one b (information:
    of the variants of INFORMATION_VARIANTS, from the outputs of their graph's replays)."""
    b = problem.b
    out = {"graph": {}, "pdl_chain": {}, "producer": {}, "verify": {name: {} for name in VARIANT_NAMES},
           "information": {}}
    for name in VARIANT_NAMES:
        out["graph"][name] = rec.attempt(f"graph {name} b={b}", measure, problem, name, problem.launcher(name),
                                         cfg, out["verify"][name], "graph")
        if name in INFORMATION_VARIANTS:
            out["information"][name] = rec.attempt(f"information {name} b={b}", problem.information, name)
    for target, (src, dst) in (("logits", (problem.logits_src, problem.logits)),
                               ("ids", (problem.fi_ids_src, problem.fi_ids))):
        out["producer"][target] = rec.attempt(f"producer {target} b={b}", lambda: summarize(
            _time_fn(lambda: produce(src, dst), cfg)))
    for name in VARIANT_NAMES:
        src, dst = problem.producer_target(name)
        run = problem.launcher(name)
        chained = lambda src=src, dst=dst, run=run: (produce(src, dst), run())  # noqa: E731
        timed = rec.attempt(f"pdl chain {name} b={b}", measure, problem, name, chained, cfg, out["verify"][name],
                            "pdl_chain")
        out["pdl_chain"][name] = _minus_producer(timed, out["producer"]["ids" if dst is problem.fi_ids else "logits"])
    return out


def eager_us(run, calls):
    """Host time of one eager call in µs: the mean of ``calls`` calls back to back with one sync after them,
    the median of REPEATS such means (each of them kept)."""
    run()
    torch.cuda.synchronize()
    means = means_us(run, calls, torch.cuda.synchronize)
    return {"mean_us": median(means), "means_us": means, "calls": calls}


def eager_parts(problem, name, calls):
    """Where one eager ``route()`` call of variant ``name`` (``cute`` or ``cute_meta``) spends its host time, µs
    each (median of REPEATS means of ``calls``): the call signature, its lookup in the cache of checked
    calls, ``routing.current_device()``, ``routing.current_stream()``, and the compiled TVM-FFI function called
    alone with the launch arguments a cache hit holds."""
    args = device.route_args(getattr(problem, name))
    logits, bias, ids, weights, scale, renormalize, metadata, offset, count, tile_n = (*args, None, 0, 0, 0)[:10]
    full = (logits, bias, ids, weights, scale, renormalize, metadata, offset, count, tile_n)
    key = contract.signature(*full)
    checked = contract.CheckedCalls()
    checked.add(key, "entry")
    with_metadata = metadata is not None
    fn = routing.compiled_routing(with_metadata, renormalize, routing.kernel_tokens(with_metadata, logits.shape[0],
                                                                                    tile_n))
    scalars = (offset, count, tile_n, routing.cta_table(tile_n)) if with_metadata else ()
    launch_args = routing.launch_arguments(logits, bias, ids, weights, routing.scale_f32(scale), metadata, *scalars)
    index = logits.device.index
    stream = routing.current_stream(index)
    signature = median(means_us(lambda: contract.signature(*full), calls))
    lookup = median(means_us(lambda: checked.get(contract.signature(*full)), calls)) - signature
    current = median(means_us(routing.current_device, calls))
    stream_us = median(means_us(lambda: routing.current_stream(index), calls))
    torch.cuda.synchronize()
    compiled = median(means_us(lambda: fn(*launch_args, stream), calls))
    torch.cuda.synchronize()
    return {"signature_us": signature, "lookup_us": lookup, "current_device_us": current,
            "current_stream_us": stream_us, "compiled_call_us": compiled, "calls": calls}


def _time_fn(fn, cfg):
    graph = capture(fn, cfg.iterations)
    try:
        return time_graph(graph, cfg.iterations, cfg.repetitions)
    finally:
        graph.reset()


def _minus_producer(chain, producer):
    """The routing's share of a producer + routing iteration (median - median, min - min)."""
    if "error" in chain:
        return chain
    if "error" in producer:
        return {"error": f"producer alone not timed: {producer['error']}", "chain": chain}
    return {"median_us": chain["median_us"] - producer["median_us"], "min_us": chain["min_us"] - producer["min_us"],
            "chain": chain, "producer_median_us": producer["median_us"]}


def resources(rec, problem):
    """Registers, shared, local memory and stack of each kernel's binary (cuobjdump): the CuTe variants
    compiled for sm_90a, the Triton kernel as launched on ``problem``'s tensors, FlashInfer's library."""
    out = {}
    for name, metadata, tokens in (("cute", False, 0), ("cute_meta", True, 0), ("cute_meta, b = 1", True, 1),
                                   ("cute_meta, b = 2", True, 2)):
        out[name] = rec.attempt(f"resources {name}", lambda m=metadata, t=tokens: resource_usage(
            checks.artifacts(m, True, t)[1]))
    if problem is None:
        out["triton"] = {"error": "no problem was set up, so no Triton kernel was launched"}
    else:
        out["triton"] = rec.attempt("resources triton", lambda: resource_usage(
            launch(problem.logits, problem.bias, problem.triton_weights, problem.triton_ids, SCALE, True).asm["cubin"]))
    out["flashinfer"] = rec.attempt("resources flashinfer", lambda: _flashinfer_resources(build.LIBRARY,
                                                                                        "DynBlockKernel"))
    block, dyn_block = fused_peer.KERNELS.values()
    for kernel, label in ((block, f"block kernel, b <= {fused_peer.BLOCK_KERNEL_MAX_TOKENS}"),
                          (dyn_block, f"dyn-block kernel, b {fused_peer.BLOCK_KERNEL_MAX_TOKENS + 1}..16")):
        out[f"flashinfer_fused ({label})"] = rec.attempt(
            f"resources flashinfer_fused {kernel}", lambda k=kernel: _flashinfer_resources(build.FUSED_LIBRARY, k))
    return out


def _flashinfer_resources(library, fragment):
    """The resources of the one kernel of ``library`` whose name contains ``fragment``."""
    found = {name: r for name, r in binary_resource_usage(library).items() if fragment in name}
    if len(found) != 1:
        raise RuntimeError(f"expected one {fragment} in {library}, found {sorted(found)}")
    return next(iter(found.values()))
