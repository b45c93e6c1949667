"""Nsight Compute, where it runs: one ncu pass over eager launches of the profiled variants (this package's
CLI re-entered as the workload), each kernel's own duration and launch resources matched to its launch."""

import csv
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from common.cuda_tools import find_tool
from common.provenance import REPO_ROOT
from kernel import routing
from properties.bench.problem import Config, Problem
from properties.bench.timing import error_line

NCU_VARIANTS = ("cute", "cute_meta", "triton", "flashinfer", "flashinfer_pdl", "flashinfer_fused")
# Name fragments of each profiled kernel (ncu's -k filter is "regex:routing", which all three contain).
NCU_KERNEL_NAMES = {"cute": "Routing", "cute_meta": "Routing", "triton": "_routing_kernel",
                    "flashinfer": "routingIndicesDynBlockKernel", "flashinfer_pdl": "routingIndicesDynBlockKernel",
                    # routingIndicesBlockKernel for b <= 4, routingIndicesDynBlockKernel above
                    "flashinfer_fused": "BlockKernel"}
NCU_METRICS = ("gpu__time_duration.sum", "sm__cycles_elapsed.max", "smsp__inst_executed.sum",
               "launch__registers_per_thread", "launch__shared_mem_per_block_static",
               "launch__shared_mem_per_block_dynamic", "launch__block_size")
NCU_TIMEOUT_S = 180
_TIME_UNITS = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
               "second": 1e6, "s": 1e6}


def find_ncu():
    """The ncu executable, or None."""
    return find_tool("ncu", "opt/nvidia/nsight-compute/*/ncu")


def ncu_workload(args):
    """Run inside ncu: eager launches of NCU_VARIANTS for each b, profiled between profiler start and stop;
    writes the launch labels in order to args.ncu_workload."""
    cfg = Config.from_args(args)
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
            reasons.append(f"metrics {','.join(metrics)}: {error_line(exc)}")
    return {"available": False, "reason": " | ".join(reasons), "version": version}


def _ncu_pass(ncu, metrics, args):
    with tempfile.TemporaryDirectory() as folder:
        labels_path = Path(folder) / "labels.json"
        command = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
                   "-k", "regex:routing", "--metrics", ",".join(metrics), "--csv",
                   sys.executable, "-m", "properties.bench", "--ncu-workload", str(labels_path),
                   "--ncu-launches", str(args.ncu_launches), "--b", *map(str, args.ncu_bs),
                   *Config.from_args(args).cli_args()]
        result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=NCU_TIMEOUT_S)
        if result.returncode != 0 or not labels_path.is_file():
            raise RuntimeError(f"exit {result.returncode}: {(result.stderr + result.stdout)[-800:]}")
        kernels = assign_ncu(parse_ncu_csv(result.stdout), json.loads(labels_path.read_text()))
    return {"command": " ".join(command), "kernels": kernels}
