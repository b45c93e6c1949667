"""``make bench``: the routing kernel against the Triton and FlashInfer routing kernels and PyTorch eager,
for b = 1..8 tokens, and the harness's own throughput. Results go to one JSON file with provenance.

    python -m kernel.bench --out properties/results/bench-h200.json [--verify-record FILE ...]
    python -m kernel.bench --readme-table FILE [--update-readme]   # the README tables from a results file
    python -m kernel.bench --time-verify --out FILE                # `make verify`'s wall time on this machine

Method. Each variant (kernel.bench_report.VARIANTS) is captured ``--iterations`` times back to back into one
CUDA graph; each replay is timed with CUDA events and divided by the launch count; median and minimum over
``--repetitions`` replays. Before timing, the graph's outputs are poisoned, the graph replayed once and every
output compared with its reference (the NumPy model bit for bit; FlashInfer's enqueued result with the
oracle entry), so no timed graph skips its work. The PDL chain puts a producer kernel (it writes the logits,
or the ids for FlashInfer alone, after letting dependents launch) before every routing launch, and reports
(producer + routing) minus the producer alone. Nsight Compute, where it runs, gives each kernel's own
duration (one ncu pass over eager launches). Every measurement is recorded, or its error: one failure does
not stop the run. Set GIT_COMMIT on a machine whose copy of the tree has no .git.
"""

import argparse
import csv
import importlib.metadata
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl

from kernel import bench_report, check, ptx, routing
from kernel.bench_report import VARIANT_NAMES, VARIANTS, summarize
from kernel.layout import EXPERTS, MAX_TOKENS, TOP_K
from oracles.flashinfer_routing import DEFAULT_POISON, build, dyn_block_metadata, to_meta
from oracles.flashinfer_routing.enqueue import device_buffers, enqueue, read_back
from oracles.mufu.hardware import describe
from oracles.numpy_model import route as model_route
from oracles.numpy_model import routing_metadata
from oracles.triton_routing import fused_musespark1x_routing, launch

ROOT = Path(__file__).resolve().parents[1]
SEED = 0xBE7C4
SCALE = 2.5
EPS = 1e-15
POISON_ID = 0x7F7F7F7F
POISON_WEIGHT_BITS = 0x7FBADBAD
WARMUP_REPLAYS = 3
NCU_VARIANTS = ("cute", "cute_meta", "triton", "flashinfer", "flashinfer_pdl")
# Name fragments of each profiled kernel (ncu's -k filter is "regex:routing", which all three contain).
NCU_KERNEL_NAMES = {"cute": "Routing", "cute_meta": "Routing", "triton": "_routing_kernel",
                    "flashinfer": "routingIndicesDynBlockKernel", "flashinfer_pdl": "routingIndicesDynBlockKernel"}
NCU_METRICS = ("gpu__time_duration.sum", "sm__cycles_elapsed.max", "smsp__inst_executed.sum",
               "launch__registers_per_thread", "launch__shared_mem_per_block_static",
               "launch__shared_mem_per_block_dynamic", "launch__block_size")
NCU_TIMEOUT_S = 180
_TIME_UNITS = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
               "second": 1e6, "s": 1e6}


def _error(exc):
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
            self.errors.append({"what": what, "error": _error(exc), "trace": traceback.format_exc()[-2000:]})
            print(f"  {what}: {_error(exc)}", file=sys.stderr)
            return {"error": _error(exc)}


# ---------------------------------------------------------------------------------------------- provenance

def _nvidia_smi(field):
    out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"], capture_output=True,
                         text=True, check=True, timeout=30).stdout.splitlines()
    return out[0].strip() if out else "no output"


# Queried one at a time: a field this driver's nvidia-smi lacks costs only its own entry.
CLOCK_FIELDS = ("clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem", "clocks.applications.graphics",
                "pstate", "temperature.gpu", "power.draw", "clocks_event_reasons.active")


def clocks():
    """The GPU's clocks and state now, from nvidia-smi (each field, or its error)."""
    out = {}
    for field in CLOCK_FIELDS:
        try:
            out[field] = _nvidia_smi(field)
        except Exception as exc:  # noqa: BLE001 - recorded, not fatal
            out[field] = f"unavailable: {_error(exc)}"
    return out


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _commit():
    if os.environ.get("GIT_COMMIT"):
        return os.environ["GIT_COMMIT"]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + ("+uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git; set GIT_COMMIT)"


def machine():
    """The host: CPU model, cores, load."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    return {"cpu": model, "cores": cores, "load_average": load, "python": platform.python_version()}


def provenance():
    """GPU, driver, CUDA, clocks, package versions, commit and date of this run (on a CUDA device)."""
    prov = describe()
    prov.update({"torch": torch.__version__, "triton": triton.__version__, "numpy": np.__version__,
                 "nvidia-cutlass-dsl": _version("nvidia-cutlass-dsl"),
                 "flashinfer": f"flashinfer-python {_version('flashinfer-python')} at run time; library "
                               "build/flashinfer_oracle/libfi_dyn_block.so from 0.7.2.post1 sources",
                 "clocks": {"before": clocks()}, "host": machine(), "commit": _commit(),
                 "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    return prov


# ---------------------------------------------------------------------------------------------- problems

@dataclass(frozen=True)
class Config:
    bs: tuple
    iterations: int
    repetitions: int
    tile_n: int
    local_expert_offset: int
    num_local_experts: int

    def as_dict(self):
        return {"bs": list(self.bs), "iterations": self.iterations, "repetitions": self.repetitions,
                "tile_n": self.tile_n, "local_expert_offset": self.local_expert_offset,
                "num_local_experts": self.num_local_experts, "scale": SCALE, "renormalize": True, "seed": SEED,
                "logits": "normal(0, 2) float32", "bias": "normal(0, 0.5) float32"}


def inputs(b, seed=SEED):
    """Random logits [b, 256] and bias [256] from normal draws: no zeros, and for b = 1..8 at SEED the top 9
    corrected scores of each row lie more than 1e-4 apart, so no rounding difference reorders them."""
    rng = np.random.default_rng(seed + b)
    return (rng.normal(0, 2, (b, EXPERTS)).astype(np.float32), rng.normal(0, 0.5, EXPERTS).astype(np.float32))


class Problem:
    """Device buffers of every variant for one b, the references, and the variants' launch functions."""

    def __init__(self, b, cfg):


        self.b, self.cfg = b, cfg
        self.logits_np, self.bias_np = inputs(b)
        self.local = check.Local(cfg.local_expert_offset, cfg.num_local_experts, cfg.tile_n)
        self.expected = check.expected(self.logits_np, self.bias_np, SCALE, True, None)
        self.expected_meta = check.expected(self.logits_np, self.bias_np, SCALE, True, self.local)
        self.ids_np, weights = model_route(self.logits_np, self.bias_np, SCALE, True)
        self.weight_bits_np = weights.view(np.int32)
        self.fi_expected = to_meta(dyn_block_metadata(self.ids_np, cfg.local_expert_offset, cfg.num_local_experts,
                                                      cfg.tile_n, poison=DEFAULT_POISON))
        self.cute = check.make_buffers(self.logits_np, self.bias_np, None, "cuda")
        self.cute_meta = check.make_buffers(self.logits_np, self.bias_np, self.local, "cuda")
        # One logits tensor for every variant, so a producer writing it feeds each of them.
        self.logits, self.bias = self.cute.logits, self.cute.bias
        self.cute_meta.logits, self.cute_meta.bias = self.logits, self.bias
        self.logits_src = self.logits.clone()
        new = lambda dtype: torch.empty((b, TOP_K), dtype=dtype, device="cuda")  # noqa: E731
        self.triton_ids, self.triton_weights = new(torch.int32), new(torch.float32)
        self.torch_ids, self.torch_weights = new(torch.int32), new(torch.float32)
        self.fi_ids = torch.from_numpy(self.ids_np).cuda()
        self.fi_ids_src = self.fi_ids.clone()
        self.fi_alone = device_buffers(self.fi_ids, cfg.tile_n)
        self.fi_after_triton = device_buffers(self.triton_ids, cfg.tile_n)

    # -- launches (each enqueues one routing on the current stream)

    def run_cute(self):
        check.call_route(self.cute, SCALE, True, None)

    def run_cute_meta(self):
        check.call_route(self.cute_meta, SCALE, True, self.local)

    def run_triton(self):
        fused_musespark1x_routing(self.logits, self.bias, routed_scaling_factor=SCALE, out_weights=self.triton_weights,
                                  out_ids=self.triton_ids)

    def _enqueue(self, buffers, use_pdl):
        enqueue(buffers, self.cfg.local_expert_offset, self.cfg.num_local_experts, use_pdl=use_pdl)

    def run_torch(self):
        s = torch.sigmoid(self.logits)
        picked = torch.topk(s + self.bias, TOP_K, dim=1).indices
        w = torch.gather(s, 1, picked)
        self.torch_weights.copy_(w * (SCALE / (w.sum(dim=1, keepdim=True) + EPS)))
        self.torch_ids.copy_(picked)

    def launcher(self, name):
        """The function that enqueues variant ``name`` once."""
        return {
            "cute": self.run_cute,
            "cute_meta": self.run_cute_meta,
            "triton": self.run_triton,
            "flashinfer": lambda: self._enqueue(self.fi_alone, False),
            "flashinfer_pdl": lambda: self._enqueue(self.fi_alone, True),
            "triton+flashinfer": lambda: (self.run_triton(), self._enqueue(self.fi_after_triton, False)),
            "triton+flashinfer_pdl": lambda: (self.run_triton(), self._enqueue(self.fi_after_triton, True)),
            "torch": self.run_torch,
        }[name]

    def producer_target(self, name):
        """(source, destination) words a producer copies before variant ``name``: its input."""
        if name in ("flashinfer", "flashinfer_pdl"):
            return self.fi_ids_src, self.fi_ids
        return self.logits_src, self.logits

    # -- poison and verification

    def poison(self, name):
        if name in ("cute", "cute_meta"):
            getattr(self, name).poison()
        if name.startswith("triton"):
            self.triton_ids.fill_(POISON_ID)
            self.triton_weights.view(self.triton_ids.dtype).fill_(POISON_WEIGHT_BITS)
        if name.startswith("flashinfer"):
            self.fi_alone.poison(DEFAULT_POISON)
        if name.startswith("triton+flashinfer"):
            self.fi_after_triton.poison(DEFAULT_POISON)
        if name == "torch":
            self.torch_ids.fill_(POISON_ID)
            self.torch_weights.fill_(float("nan"))

    def mismatches(self, name):
        """What differs from the references in variant ``name``'s outputs (empty when all is equal)."""

        lines = []
        if name == "cute":
            lines += check.compare(self.cute, self.expected, 0)
        if name == "cute_meta":
            lines += check.compare(self.cute_meta, self.expected_meta, self.cfg.tile_n)
        if name.startswith("triton"):
            if not np.array_equal(self.triton_ids.cpu().numpy(), self.ids_np):
                lines.append("triton ids differ from the model's")
            if not np.array_equal(self.triton_weights.view(self.triton_ids.dtype).cpu().numpy(), self.weight_bits_np):
                lines.append("triton weight bits differ from the model's")
        for prefix, buffers in (("flashinfer", self.fi_alone), ("triton+flashinfer", self.fi_after_triton)):
            if name.startswith(prefix) and not np.array_equal(to_meta(read_back(buffers)), self.fi_expected):
                lines.append(f"{prefix}: enqueued metadata differs from the oracle entry's on the model's ids")
        if name == "torch" and not np.array_equal(np.sort(self.torch_ids.cpu().numpy(), axis=1),
                                                  np.sort(self.ids_np, axis=1)):
            lines.append("torch picks other experts than the model (its sigmoid is not Triton's, so only the "
                         "picked sets are compared)")
        return lines


# ---------------------------------------------------------------------------------------------- timing

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
    """{"graph", "pdl_chain", "producer", "verify"} of every variant for one b."""
    b = problem.b
    out = {"graph": {}, "pdl_chain": {}, "producer": {}, "verify": {name: {} for name in VARIANT_NAMES}}
    for name in VARIANT_NAMES:
        out["graph"][name] = rec.attempt(f"graph {name} b={b}", measure, problem, name, problem.launcher(name),
                                         cfg, out["verify"][name], "graph")
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
    """Host time of one eager call in µs: the mean of ``calls`` calls back to back, one sync after them."""
    run()
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(calls):
        run()
    torch.cuda.synchronize()
    return {"mean_us": (time.perf_counter() - started) / calls * 1e6, "calls": calls}


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


# ---------------------------------------------------------------------------------------------- resources

def resources(rec, problem):
    """Registers, shared, local memory and stack of each kernel's binary (cuobjdump): the CuTe variants
    compiled for sm_90a, the Triton kernel as launched on ``problem``'s tensors, FlashInfer's library."""
    out = {}
    for name, metadata in (("cute", False), ("cute_meta", True)):
        out[name] = rec.attempt(f"resources {name}",
                                lambda m=metadata: ptx.resource_usage(routing.compile_artifacts(m, True)[1]))
    if problem is None:
        out["triton"] = {"error": "no problem was set up, so no Triton kernel was launched"}
    else:
        out["triton"] = rec.attempt("resources triton", lambda: ptx.resource_usage(
            launch(problem.logits, problem.bias, problem.triton_weights, problem.triton_ids, SCALE, True).asm["cubin"]))
    out["flashinfer"] = rec.attempt("resources flashinfer", lambda: _flashinfer_resources(build.LIBRARY))
    return out


def _flashinfer_resources(library):
    found = {name: r for name, r in ptx.binary_resource_usage(library).items() if "DynBlockKernel" in name}
    if len(found) != 1:
        raise RuntimeError(f"expected one dyn-block kernel in {library}, found {sorted(found)}")
    return next(iter(found.values()))


# ---------------------------------------------------------------------------------------------- Nsight Compute

def find_ncu():
    """The ncu executable, or None."""
    found = shutil.which("ncu")
    if found:
        return found
    for candidate in sorted(Path("/usr/local").glob("cuda*/bin/ncu")) + sorted(Path("/opt/nvidia").glob("nsight-compute/*/ncu")):
        if candidate.is_file():
            return str(candidate)
    return None


def ncu_workload(args):
    """Run inside ncu: eager launches of NCU_VARIANTS for each b, profiled between profiler start and stop;
    writes the launch labels in order to args.ncu_workload."""
    cfg = _config(args)
    routing.prepare(True)
    problems = [Problem(b, cfg) for b in cfg.bs]
    for p in problems:
        for name in NCU_VARIANTS:
            p.launcher(name)()
    torch.cuda.synchronize()
    labels = []
    torch.cuda.profiler.start()
    for p in problems:
        for name in NCU_VARIANTS:
            for _ in range(args.ncu_launches):
                p.launcher(name)()
                labels.append([name, p.b])
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    Path(args.ncu_workload).write_text(json.dumps(labels))


def parse_ncu_csv(text):
    """ncu --csv output -> [(kernel name, {metric: value in base units, times in µs})] in profiling order."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    kernels = {}
    for row in rows:
        if "ID" not in row or "Metric Name" not in row:
            continue
        name, metrics = kernels.setdefault(int(row["ID"]), (row["Kernel Name"], {}))
        try:
            value = float(row["Metric Value"].replace(",", ""))
        except ValueError:
            metrics[row["Metric Name"]] = row["Metric Value"]
            continue
        unit = row.get("Metric Unit", "")
        metrics[row["Metric Name"]] = value * _TIME_UNITS[unit] if unit in _TIME_UNITS else value
    return [kernels[i] for i in sorted(kernels)]


def assign_ncu(kernels, labels):
    """Profiled kernels matched to the workload's launch labels: {variant: {b: summary}}."""
    if len(kernels) != len(labels):
        raise RuntimeError(f"ncu profiled {len(kernels)} kernels, the workload launched {len(labels)}")
    grouped = {}
    for (kernel, metrics), (name, b) in zip(kernels, labels):
        if NCU_KERNEL_NAMES[name] not in kernel:
            raise RuntimeError(f"launch {name} b={b} profiled as {kernel!r}")
        grouped.setdefault(name, {}).setdefault(str(b), []).append(metrics)
    out = {}
    for name, per_b in grouped.items():
        for b, runs in per_b.items():
            durations = [m["gpu__time_duration.sum"] for m in runs]
            out.setdefault(name, {})[b] = {"duration_us_median": float(np.median(durations)),
                                           "duration_us_min": min(durations), "launches": len(runs),
                                           "metrics": runs[0]}
    return out


def run_ncu(args):
    """One ncu pass over the workload (all metrics; once more with the duration only if that fails, unless
    it timed out); or why not."""
    ncu = find_ncu()
    if ncu is None:
        return {"available": False, "reason": "ncu not found on PATH, in /usr/local/cuda*/bin or /opt/nvidia"}
    lines = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.splitlines()
    version = next((line for line in lines if line.startswith("Version")), " ".join(lines[-1:]))
    reasons = []
    for metrics in (NCU_METRICS, NCU_METRICS[:1]):
        try:
            return {"available": True, "version": version, **_ncu_pass(ncu, metrics, args)}
        except subprocess.TimeoutExpired:
            reasons.append(f"metrics {','.join(metrics)}: no result within {NCU_TIMEOUT_S} s")
            break
        except Exception as exc:  # noqa: BLE001 - recorded: ncu is optional
            reasons.append(f"metrics {','.join(metrics)}: {_error(exc)}")
    return {"available": False, "reason": " | ".join(reasons), "version": version}


def _ncu_pass(ncu, metrics, args):
    with tempfile.TemporaryDirectory() as folder:
        labels_path = Path(folder) / "labels.json"
        command = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
                   "-k", "regex:routing", "--metrics", ",".join(metrics), "--csv",
                   sys.executable, "-m", "kernel.bench", "--ncu-workload", str(labels_path),
                   "--ncu-launches", str(args.ncu_launches), "--bs", *map(str, args.ncu_bs), *_config_args(args)]
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=NCU_TIMEOUT_S)
        if result.returncode != 0 or not labels_path.is_file():
            raise RuntimeError(f"exit {result.returncode}: {(result.stderr + result.stdout)[-800:]}")
        kernels = assign_ncu(parse_ncu_csv(result.stdout), json.loads(labels_path.read_text()))
    return {"command": " ".join(command), "kernels": kernels}


# ---------------------------------------------------------------------------------------------- harness

def _rate(fn, seconds):
    """Calls of fn(i) per second over at least ``seconds`` (and at least 3 calls), after one untimed call
    (which loads tables and compiles)."""
    fn(0)
    count, start = 0, time.perf_counter()
    while count < 3 or time.perf_counter() - start < seconds:
        fn(count)
        count += 1
    return count / (time.perf_counter() - start)


def _case_pool(b, n=32):
    rng = np.random.default_rng(SEED ^ b)
    return [(rng.normal(0, 2, (b, EXPERTS)).astype(np.float32), rng.normal(0, 0.5, EXPERTS).astype(np.float32))
            for _ in range(n)]


HARNESS_CASES = (("b=8, metadata tile 8", 8, True), ("b=1, no metadata", 1, False))


def gpu_differential_rate(seconds):
    """kernel.check.run_case per second: fresh poisoned buffers, one route, the NumPy model, bitwise compare."""
    out = {}
    for label, b, with_meta in HARNESS_CASES:
        pool = _case_pool(b)
        local = check.Local(0, EXPERTS, 8) if with_meta else None

        def one(i, pool=pool, local=local):
            logits, bias = pool[i % len(pool)]
            if check.run_case(logits, bias, SCALE, True, local):
                raise RuntimeError("a differential case mismatched while timing the harness")

        out[label] = {"cases_per_s": _rate(one, seconds), "what": "kernel.check.run_case: buffers, poison, route, "
                                                                  "NumPy model, bitwise compare (one process)"}
    return out


def cpu_model_rate(seconds):
    """NumPy model cases per second on one process: route (and metadata) of one case, no GPU."""
    out = {}
    for label, b, with_meta in HARNESS_CASES:
        pool = _case_pool(b)

        def one(i, pool=pool, with_meta=with_meta):
            ids, _ = model_route(*pool[i % len(pool)], SCALE, True)
            if with_meta:
                routing_metadata(ids, 0, EXPERTS, 8)

        out[label] = {"cases_per_s": _rate(one, seconds), "what": f"NumPy model only, {machine()['cpu']}"}
    return out


def exhaustive_sweep():
    """The H200 sweep times recorded by the primitives' exhaustive proof (not re-measured here)."""
    path = ROOT / "oracles" / "mufu" / "data" / "exhaustive-proof.json"
    record = json.loads(path.read_text())
    return {"source": f"{path.relative_to(ROOT)} ({record['provenance']['gpu']}, {record['provenance']['date']})",
            "seconds": {name: r["seconds"] for name, r in record["results"].items()},
            "inputs": {name: r["inputs"] for name, r in record["results"].items()}}


def time_verify(out_path):
    """Wall time of `make verify`'s recipe on this machine (the FlashInfer oracle build, then the gate),
    with the environment already set up; writes a verify record to ``out_path``."""
    steps = [[sys.executable, "-m", "oracles.flashinfer_routing"]]
    with tempfile.TemporaryDirectory() as reports:
        steps.append([sys.executable, "-m", "properties.gate", "--reports", reports])
        host = machine()
        start, codes = time.perf_counter(), []
        for step in steps:
            codes.append(subprocess.call(step, cwd=ROOT))
        seconds = time.perf_counter() - start
        summary = json.loads((Path(reports) / "verify.json").read_text())
    record = {"tier": summary["tier"], "verdict": summary["verdict"], "seconds_total": round(seconds, 1),
              "seconds_pytest": summary["seconds"], "exit_codes": codes, "commands": [" ".join(s) for s in steps],
              "machine": f"{host['cpu']}, {host['cores']} cores, load average at start {host['load_average']}",
              "note": "the CPU may be shared with other processes; the load average says how busy it was",
              "commit": _commit(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    record["cpu_model"] = cpu_model_rate(2.0)
    Path(out_path).write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "cpu_model"}, indent=1))
    return 0 if record["verdict"] == "PASS" else 1


def verify_record(path):
    """A --time-verify record, or a gate report (reports/verify.json: pytest's time only) in that form."""
    record = json.loads(Path(path).read_text())
    if "seconds_total" not in record:
        record = {"tier": record["tier"], "verdict": record["verdict"], "seconds_total": record["seconds"],
                  "machine": f"gate report {path}: pytest time only, not the FlashInfer build"}
    return record


# ---------------------------------------------------------------------------------------------- the run

def _config(args):
    return Config(tuple(args.bs), args.iterations, args.repetitions, args.tile_n, args.local_expert_offset,
                  args.num_local_experts)


def _config_args(args):
    return ["--tile-n", str(args.tile_n), "--local-expert-offset", str(args.local_expert_offset),
            "--num-local-experts", str(args.num_local_experts)]


def run(args):
    if not torch.cuda.is_available():
        print("kernel.bench: no CUDA device: the benchmark runs on a GPU (--readme-table and --time-verify do "
              "not need one)", file=sys.stderr)
        return 2
    started = time.perf_counter()
    rec = Recorder()
    cfg = _config(args)
    results = {"schema": bench_report.SCHEMA, "provenance": provenance(),
               "config": cfg.as_dict(), "variants": dict(VARIANTS),
               "graph": {n: {} for n in VARIANT_NAMES}, "pdl_chain": {n: {} for n in VARIANT_NAMES},
               "verify": {n: {} for n in VARIANT_NAMES}}
    results["pdl_chain"]["producer"] = {"logits": {}, "ids": {}}
    results["eager"] = {name: {} for name in bench_report.EAGER_VARIANTS}
    print(f"bench: {results['provenance']['gpu']}, b in {list(cfg.bs)}, {cfg.iterations} launches per graph, "
          f"{cfg.repetitions} replays", flush=True)
    rec.attempt("prepare", routing.prepare, True)
    first_problem = None
    for b in cfg.bs:
        problem = rec.attempt(f"problem b={b}", Problem, b, cfg)
        if isinstance(problem, dict):
            for mode in ("graph", "pdl_chain"):
                for name in VARIANT_NAMES:
                    results[mode][name][str(b)] = problem
            continue
        measured = bench_problem(problem, cfg, rec)
        for name in VARIANT_NAMES:
            for mode in ("graph", "pdl_chain", "verify"):
                results[mode][name][str(b)] = measured[mode][name]
        for name in bench_report.EAGER_VARIANTS:
            results["eager"][name][str(b)] = rec.attempt(f"eager {name} b={b}", eager_us, problem.launcher(name),
                                                         args.eager_calls)
        for target, stat in measured["producer"].items():
            results["pdl_chain"]["producer"][target][str(b)] = stat
        print(f"  b={b}: " + ", ".join(f"{n} {_short(measured['graph'][n])}" for n in VARIANT_NAMES), flush=True)
        if first_problem is None:
            first_problem = problem
    results["provenance"]["clocks"]["after_timing"] = clocks()
    results["resources"] = resources(rec, first_problem)
    ncu = {"available": False, "reason": "--no-ncu"} if args.no_ncu else rec.attempt("ncu", run_ncu, args)
    results["ncu"] = {"available": False, "reason": ncu["error"]} if "error" in ncu else ncu
    results["harness"] = {
        "gpu_differential": rec.attempt("gpu differential rate", gpu_differential_rate, args.harness_seconds),
        "cpu_model": rec.attempt("cpu model rate", cpu_model_rate, args.harness_seconds),
        "exhaustive_sweep": rec.attempt("exhaustive sweep record", exhaustive_sweep),
        "verify_records": [rec.attempt(f"verify record {p}", verify_record, p) for p in args.verify_record],
    }
    results["errors"] = rec.errors
    results["seconds"] = round(time.perf_counter() - started, 1)
    results["targets"] = bench_report.evaluate_targets(results)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print()
    print(rec.attempt("results table", bench_report.readme_table, results))
    print(f"{len(rec.errors)} measurement errors; {results['seconds']} s; results in {out}")
    return 1 if rec.errors else 0


def _short(entry):
    return "error" if "error" in entry else f"{entry['median_us']:.2f}"


def readme(args):
    results = bench_report.check_schema(json.loads(Path(args.readme_table).read_text()))
    body = bench_report.readme_table(results)
    if args.update_readme:
        path = ROOT / "README.md"
        path.write_text(bench_report.replace_readme_block(path.read_text(), body))
    print(body, end="")
    return 0


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--readme-table", metavar="FILE", help="print the README tables of a results file")
    mode.add_argument("--time-verify", action="store_true", help="time `make verify`'s recipe; record to --out")
    mode.add_argument("--ncu-workload", metavar="LABELS", help=argparse.SUPPRESS)
    parser.add_argument("--update-readme", action="store_true", help="with --readme-table: rewrite README.md's block")
    parser.add_argument("--out", default=str(ROOT / "properties" / "results" / "bench-h200.json"))
    parser.add_argument("--bs", type=int, nargs="+", default=list(range(1, MAX_TOKENS + 1)))
    parser.add_argument("--iterations", type=int, default=1000, help="launches per CUDA graph")
    parser.add_argument("--repetitions", type=int, default=20, help="timed replays per graph")
    parser.add_argument("--eager-calls", type=int, default=2000, help="eager route() calls timed per b and variant")
    parser.add_argument("--tile-n", type=int, default=8)
    parser.add_argument("--local-expert-offset", type=int, default=0)
    parser.add_argument("--num-local-experts", type=int, default=EXPERTS)
    parser.add_argument("--no-ncu", action="store_true", help="skip the Nsight Compute pass")
    parser.add_argument("--ncu-bs", type=int, nargs="+", default=[1, MAX_TOKENS])
    parser.add_argument("--ncu-launches", type=int, default=3, help="profiled launches per variant and b")
    parser.add_argument("--harness-seconds", type=float, default=3.0, help="time per harness throughput figure")
    parser.add_argument("--verify-record", action="append", default=[],
                        help="a --time-verify record (or several) to include")
    args = parser.parse_args(argv)
    if not all(1 <= b <= MAX_TOKENS for b in args.bs + args.ncu_bs):
        parser.error(f"--bs and --ncu-bs take token counts in 1..{MAX_TOKENS}")
    if args.iterations < 1 or args.repetitions < 1:
        parser.error("--iterations and --repetitions must be at least 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.readme_table:
        return readme(args)
    if args.time_verify:
        return time_verify(args.out)
    if args.ncu_workload:
        ncu_workload(args)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
