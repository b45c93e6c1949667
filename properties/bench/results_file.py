"""The benchmark results file (``python -m properties.bench``): its schema, the targets, and the README tables.

Pure Python on the JSON the benchmark writes: no GPU, no torch. Times are per launch in microseconds.
"""

import math
import statistics

from kernel.layout import MAX_TOKENS
from common.markdown_block import Block
from properties.bench import speed_record
from properties.bench.speed_record import SECTION as SPEED_SECTION

SCHEMA = "kernel.bench/1"

# (name, what one launch does). Order is the table's column order.
VARIANTS = (
    ("cute", "CuTe kernel, ids + weights (launched with PDL)"),
    ("cute_meta", "CuTe kernel, ids + weights + metadata (launched with PDL)"),
    ("triton", "Triton oracle, ids + weights (no PDL)"),
    ("flashinfer", "FlashInfer routingIndicesDynBlockKernel, metadata from ids, mUsePdl=false"),
    ("flashinfer_pdl", "FlashInfer routingIndicesDynBlockKernel, metadata from ids, mUsePdl=true"),
    ("triton+flashinfer", "Triton oracle, then FlashInfer's dyn-block kernel on its ids (mUsePdl=false)"),
    ("triton+flashinfer_pdl", "Triton oracle, then FlashInfer's dyn-block kernel on its ids (mUsePdl=true)"),
    ("torch", "PyTorch eager: sigmoid, add, topk, gather, normalize, copies into the int32/fp32 outputs "
              "(no PDL)"),
    ("flashinfer_fused", "FlashInfer fused routing from logits (routingCustom::run as its routing runner calls "
                         "it for sigmoid + bias, top 8 of 256, one expert group: routingIndicesBlockKernel for "
                         "b <= 4, routingIndicesDynBlockKernel for 5..16; ids, FP32 weights and metadata in one "
                         "launch; mUsePdl=true)"),
)
VARIANT_NAMES = tuple(name for name, _ in VARIANTS)
# Variants whose outputs are described beyond the checks (results["information"], absent from older files):
# the FlashInfer peer's kernel and its weights against the model's, which it does not match bit for bit.
INFORMATION_VARIANTS = ("flashinfer_fused",)
SUBJECT = "cute_meta"
# (name, baseline variants (the faster one counts), the speedup the subject must reach over it).
TARGETS = (
    ("vs FlashInfer alone", ("flashinfer", "flashinfer_pdl"), 1.3),  # issue 31 (its moonshot: 1.5)
    ("vs Triton then FlashInfer", ("triton+flashinfer", "triton+flashinfer_pdl"), 2.0),
)
MODES = ("graph", "pdl_chain")
# Variants whose eager route() call is timed on the host (results["eager"], absent from older files), and the same
# calls through the torch op torch.ops.musespark.route (kernel/op.py), each named with OP_SUFFIX (absent from older
# files).
EAGER_VARIANTS = ("cute", "cute_meta")
OP_SUFFIX = "_op"
EAGER_OP_VARIANTS = tuple(name + OP_SUFFIX for name in EAGER_VARIANTS)
EAGER_LIMIT_US = 5.0
EAGER_MOONSHOT_RATIO = 2.0  # the eager call with metadata within this many graphed launches
CPU_VERIFY_LIMIT_S = 600.0
SWEEP_LIMIT_S = 60.0

_TOP_KEYS = ("schema", "provenance", "config", "variants", "graph", "pdl_chain", "verify", "ncu", "resources",
             "harness", "errors")
_PROVENANCE_KEYS = ("gpu", "driver", "cuda", "clocks", "torch", "triton", "nvidia-cutlass-dsl", "commit",
                    "date")
README_BLOCK = Block("<!-- bench-table:begin (python -m properties.bench --readme-table FILE --update-readme) -->",
                     "<!-- bench-table:end -->")


def check_schema(results):
    """Raise ValueError naming the first missing or malformed part of a results dict; return it unchanged."""
    if not isinstance(results, dict):
        raise ValueError(f"results must be a JSON object, got {type(results).__name__}")
    missing = [k for k in _TOP_KEYS if k not in results]
    if missing:
        raise ValueError(f"results lack {missing}")
    if results["schema"] != SCHEMA:
        raise ValueError(f"results schema must be {SCHEMA!r}, got {results['schema']!r}")
    missing = [k for k in _PROVENANCE_KEYS if k not in results["provenance"]]
    if missing:
        raise ValueError(f"results provenance lacks {missing}")
    bs = results["config"].get("bs")
    if not bs or not all(isinstance(b, int) and 1 <= b <= MAX_TOKENS for b in bs):
        raise ValueError(f"results config.bs must list token counts in 1..{MAX_TOKENS}, got {bs!r}")
    for mode in MODES:
        for name in file_variants(results):
            per_b = results[mode].get(name)
            if not isinstance(per_b, dict) or sorted(per_b, key=int) != [str(b) for b in bs]:
                raise ValueError(f"results {mode}.{name} must hold one entry per b in {bs}")
            for b, entry in per_b.items():
                if "error" not in entry and not _is_time(entry.get("median_us")):
                    raise ValueError(f"results {mode}.{name}[{b}] needs median_us or error, got {entry!r}")
    return results


def file_variants(results):
    """The variants of VARIANT_NAMES a results file holds (a file older than a variant lacks it), in order."""
    listed = results.get("variants")
    return tuple(n for n in VARIANT_NAMES if n in listed) if isinstance(listed, dict) else VARIANT_NAMES


def _is_time(x):
    return isinstance(x, (int, float)) and math.isfinite(x)


def summarize(samples_us):
    """Median and minimum of per-launch samples (µs), and the samples themselves."""
    if not samples_us:
        raise ValueError("summarize needs at least one sample")
    return {"median_us": statistics.median(samples_us), "min_us": min(samples_us),
            "samples_us": [round(s, 4) for s in samples_us]}


def _time(results, mode, name, b, key="median_us"):
    entry = results[mode].get(name, {}).get(str(b), {})
    value = entry.get(key)
    return value if _is_time(value) else None


def evaluate_targets(results):
    """Per mode and target: for each b the subject's time, the faster baseline, the speedup and whether it
    reaches the factor; ``met`` is True when every b does, False when one does not, None when a time is
    missing (an error in the run) or not positive (the PDL overlap hid the launch: no ratio exists)."""
    out = {}
    for mode in MODES:
        out[mode] = {}
        for label, baselines, factor in TARGETS:
            per_b, verdicts = {}, []
            for b in results["config"]["bs"]:
                subject = _time(results, mode, SUBJECT, b)
                timed = [(t, n) for n in baselines if (t := _time(results, mode, n, b)) is not None]
                entry = {"subject_us": subject, "factor": factor}
                if subject is not None and subject > 0 and timed:
                    best, name = min(timed)
                    speedup = best / subject
                    entry.update(baseline=name, baseline_us=best, speedup=speedup, met=speedup >= factor)
                else:
                    entry.update(baseline=None, baseline_us=None, speedup=None, met=None)
                per_b[str(b)] = entry
                verdicts.append(entry["met"])
            met = None if None in verdicts else all(verdicts)
            out[mode][label] = {"factor": factor, "met": met, "per_b": per_b}
    out["cpu_verify_under_10_min"] = _verify_target(results)
    out["exhaustive_sweep_under_60_s"] = _sweep_target(results)
    return out


def _verify_target(results):
    runs = [r for r in results["harness"].get("verify_records", []) if r.get("tier") == "cpu" and "error" not in r]
    if not runs:
        return {"met": None, "why": "no CPU-tier verify record in this results file"}
    worst = max(r["seconds_total"] for r in runs)
    return {"met": worst < CPU_VERIFY_LIMIT_S, "seconds": worst, "limit_s": CPU_VERIFY_LIMIT_S}


def _sweep_target(results):
    sweep = results["harness"].get("exhaustive_sweep", {}).get("seconds", {})
    if not sweep:
        return {"met": None, "why": "no exhaustive sweep record"}
    worst = max(sweep.values())
    return {"met": worst < SWEEP_LIMIT_S, "seconds": worst, "limit_s": SWEEP_LIMIT_S}


# ---------------------------------------------------------------------------------------------- tables

def _cell(entry, with_min=True):
    if not entry:
        return "n/a"
    if "error" in entry:
        return "error"
    text = f"{entry['median_us']:.2f}"
    return f"{text} ({entry['min_us']:.2f})" if with_min and _is_time(entry.get("min_us")) else text


def _row(cells):
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _table(head, rows):
    return [_row(head), _row(["---"] * len(head)), *(_row(r) for r in rows)]


def _verdict(met):
    return {True: "met", False: "NOT met", None: "undetermined"}[met]


def _provenance_line(results):
    p = results["provenance"]
    clocks = p.get("clocks", {}).get("before", {})
    clock_text = ", ".join(f"{k} {v}" for k, v in clocks.items()) if isinstance(clocks, dict) else str(clocks)
    return (f"{p['gpu']}, driver {p['driver']}, CUDA {p['cuda']}, torch {p['torch']}, Triton {p['triton']}, "
            f"CUTLASS DSL {p['nvidia-cutlass-dsl']}, FlashInfer {p.get('flashinfer', 'n/a')}; clocks at start: "
            f"{clock_text}; commit {p['commit']}; {p['date']}")


def timing_tables(results):
    """Markdown lines: the graph-replay table and the PDL-chain table."""
    cfg = results["config"]
    lines = [f"Per-launch time in µs, median of {cfg['repetitions']} replays of a CUDA graph of "
             f"{cfg['iterations']} launches (minimum in parentheses); metadata for local experts "
             f"[{cfg['local_expert_offset']}, {cfg['local_expert_offset'] + cfg['num_local_experts']}), "
             f"tile {cfg['tile_n']}.", ""]
    names = file_variants(results)
    lines += _table(["b", *names],
                    [[b, *(_cell(results["graph"][n].get(str(b))) for n in names)] for b in cfg["bs"]])
    peer = " FlashInfer's fused routing (flashinfer_fused) reads the logits." if "flashinfer_fused" in names else ""
    lines += ["", "Behind a producer kernel that writes the inputs (logits; ids for FlashInfer alone) and "
                  "lets dependents launch at once: time of producer + routing per iteration minus the "
                  "producer alone, µs, median (minimum). Only the CuTe kernel and FlashInfer with "
                  "mUsePdl=true launch with PDL; Triton and PyTorch eager wait for the producer to finish." + peer,
              ""]
    producer = results["pdl_chain"].get("producer", {})
    lines += _table(["b", "producer (logits)", "producer (ids)", *names],
                    [[b, *(_cell(producer.get(target, {}).get(str(b))) for target in ("logits", "ids")),
                      *(_cell(results["pdl_chain"][n].get(str(b))) for n in names)] for b in cfg["bs"]])
    return lines


def information_table(results):
    """Markdown lines: the FlashInfer peer's kernel per b and its weights against the model's (information,
    not a check), or nothing for a file without it."""
    info = results.get("information", {}).get("flashinfer_fused")
    if not info:
        return []
    rows = []
    for b in results["config"]["bs"]:
        e = info.get(str(b))
        if not e:
            rows.append([b, "n/a", "n/a", "n/a"])
        elif "error" in e:
            rows.append([b, "error", "error", "error"])
        else:
            ulp = "n/a (NaN)" if e["max_ulp"] is None else e["max_ulp"]
            rows.append([b, e["kernel"], f"{e['bits_differ']} of {e['weights']}", ulp])
    return ["FlashInfer's fused routing against the NumPy model (information, not a check: its ids and metadata "
            "are checked bit for bit above; its weights are not, since its sigmoid goes through tanh and its "
            "renormalization adds 1e-20, not 1e-15):", ""] + \
        _table(["b", "kernel launched", "weights whose bits differ", "max distance (ulp)"], rows) + [""]


def target_tables(results):
    """Markdown lines: the speedup of the subject over each target's faster baseline, per b and mode."""
    targets = evaluate_targets(results)
    lines = []
    for mode in MODES:
        head = ["b"] + [f"{label}: best baseline / {SUBJECT} (>= {factor})" for label, _, factor in TARGETS]
        rows = []
        for b in results["config"]["bs"]:
            cells = [b]
            for label, _, _ in TARGETS:
                e = targets[mode][label]["per_b"][str(b)]
                cells.append("n/a" if e["speedup"] is None else
                             f"{e['speedup']:.2f}x ({e['baseline']} {e['baseline_us']:.2f} / {e['subject_us']:.2f})")
            rows.append(cells)
        verdicts = "; ".join(f"{label}: {_verdict(targets[mode][label]['met'])}" for label, _, _ in TARGETS)
        lines += [f"Targets, {mode.replace('_', ' ')} ({verdicts}):", ""] + _table(head, rows) + [""]
    return lines


def ncu_table(results):
    """Markdown lines: Nsight Compute's kernel durations and launch resources, or why there are none."""
    ncu = results["ncu"]
    if not ncu.get("available"):
        return [f"Nsight Compute: unavailable ({ncu.get('reason', 'no reason recorded')})."]
    kernels = ncu["kernels"]
    bs = sorted({int(b) for per_b in kernels.values() for b in per_b})
    head = ["kernel", *(f"duration b={b} (µs)" for b in bs), "registers", "static smem (B)",
            f"dynamic smem b={bs[-1]} (B)", f"instructions b={bs[-1]}", f"SM cycles b={bs[-1]}"]
    rows = []
    for name in file_variants(results):
        if name not in kernels:
            continue
        per_b = kernels[name]
        last = per_b.get(str(bs[-1]), {}).get("metrics", {})
        rows.append([name, *(_ncu_duration(per_b.get(str(b))) for b in bs),
                     *(_int(last.get(m)) for m in ("launch__registers_per_thread",
                                                  "launch__shared_mem_per_block_static",
                                                  "launch__shared_mem_per_block_dynamic",
                                                  "smsp__inst_executed.sum", "sm__cycles_elapsed.max"))])
    return [f"Nsight Compute ({ncu.get('version', '')}, --clock-control none): gpu__time_duration.sum, median "
            "of the launches profiled.", ""] + _table(head, rows)


def _ncu_duration(entry):
    if not entry:
        return "n/a"
    return "error" if "error" in entry else f"{entry['duration_us_median']:.2f}"


def _int(value):
    return "n/a" if value is None else f"{int(value):,}"


def eager_table(results):
    """Markdown lines: the host time of one eager route() call, beside it the torch op's where the file has it, or
    nothing for a file without them."""
    eager = results.get("eager")
    if not eager:
        return []
    bs = results["config"]["bs"]
    names = EAGER_VARIANTS + tuple(n for n in EAGER_OP_VARIANTS if n in eager)
    cells = lambda e: "n/a" if not e else "error" if "error" in e else f"{e['mean_us']:.2f}"  # noqa: E731
    rows = [[b, *(cells(eager.get(n, {}).get(str(b))) for n in names)] for b in bs]
    meta = [eager.get("cute_meta", {}).get(str(b), {}) for b in bs]
    met = all(_is_time(e.get("mean_us")) and e["mean_us"] <= EAGER_LIMIT_US for e in meta)
    graph = [results["graph"].get("cute_meta", {}).get(str(b), {}).get("median_us") for b in bs]
    moonshot = all(_is_time(e.get("mean_us")) and _is_time(g) and e["mean_us"] <= EAGER_MOONSHOT_RATIO * g
                   for e, g in zip(meta, graph))
    calls = next((e["calls"] for e in meta if "calls" in e), "?")
    repeats = next((len(e["means_us"]) for e in meta if "means_us" in e), None)
    method = f"mean of {calls} calls back to back, one sync after them"
    method = f"median of {repeats} means of {calls} calls back to back, one sync after each" if repeats else method
    through_op = f" The {' and '.join(names[len(EAGER_VARIANTS):])} columns: the same calls through the torch op " \
                 "torch.ops.musespark.route." if len(names) > len(EAGER_VARIANTS) else ""
    return [f"Eager route() on the host, µs per call ({method}); "
            f"with metadata at most {EAGER_LIMIT_US:g} µs: {_verdict(met)}; within {EAGER_MOONSHOT_RATIO:g}x of "
            f"its graphed launch (the moonshot): {_verdict(moonshot)}.{through_op}", ""] + \
        _table(["b", *names], rows) + [""] + eager_parts_table(results) + launch_floor_lines(results)


def launch_floor_lines(results):
    """Markdown lines: the floor under any launch issued from Python on the host (properties/bench/floor.py), or
    nothing for a file without it."""
    floor = results.get("launch_floor")
    if not floor:
        return []
    if "error" in floor:
        return ["The floor of a launch issued from Python (an empty kernel through ctypes): not measured, "
                f"{floor['error']}", ""]
    return [f"The floor of a launch issued from Python on this host (an empty kernel through ctypes into the driver, "
            f"{floor['calls']} calls back to back): cuLaunchKernel {floor['cuLaunchKernel_us']:.2f} µs, "
            f"cuLaunchKernelEx with the PDL attribute {floor['cuLaunchKernelEx_pdl_us']:.2f} µs per call.", ""]


EAGER_PARTS = (("signature_us", "signature"), ("lookup_us", "lookup"), ("current_device_us", "current_device()"),
               ("current_stream_us", "current stream"), ("compiled_call_us", "compiled call alone"))


def eager_parts_table(results):
    """Markdown lines: the parts of one eager route() call per variant (results["eager_parts"][variant][b]; an
    older file holds them with metadata only, per b), the parts a file has, or nothing for a file without them."""
    parts = results.get("eager_parts")
    if not parts:
        return []
    by_variant = parts if set(parts) <= set(EAGER_VARIANTS) else {"cute_meta": parts}
    cells = lambda e, k: "error" if "error" in e else f"{e[k]:.2f}"  # noqa: E731
    lines = []
    for name, per_b in by_variant.items():
        columns = [(k, label) for k, label in EAGER_PARTS if any(k in e for e in per_b.values())]
        rows = [[b, *(cells(per_b[b], k) for k, _ in columns)] for b in sorted(per_b, key=int)]
        lines += [f"Its parts {'with' if name == 'cute_meta' else 'without'} metadata, µs (each timed alone, as "
                  f"many calls the same way):", ""] + _table(["b", *(label for _, label in columns)], rows) + [""]
    return lines


def resource_table(results):
    """Markdown lines: registers, shared, local memory and stack of each kernel from its cubin."""
    head = ["kernel", "registers", "shared (B, static)", "local (B)", "stack (B)"]
    rows = []
    for name, r in results["resources"].items():
        if "error" in r:
            rows.append([name, "error", "", "", ""])
        else:
            rows.append([name, r["registers"], r["shared_bytes"], r["local_bytes"], r["stack_bytes"]])
    return ["Resources from cuobjdump --dump-resource-usage of each kernel's binary:", ""] + _table(head, rows)


def harness_table(results):
    """Markdown lines: the harness's own throughput and wall times."""
    h = results["harness"]
    targets = evaluate_targets(results)
    rows = []
    for key, label in (("gpu_differential", "GPU differential cases/s"), ("cpu_model", "CPU model cases/s")):
        for case, entry in h.get(key, {}).items():
            value = "error" if "error" in entry else f"{entry['cases_per_s']:,.0f}"
            rows.append([f"{label}, {case}", value, entry.get("what", "")])
    sweep = h.get("exhaustive_sweep", {})
    for primitive, seconds in sweep.get("seconds", {}).items():
        rows.append([f"exhaustive sweep, {primitive}", f"{seconds} s", sweep.get("source", "")])
    for record in h.get("verify_records", []):
        if "error" in record:
            rows.append(["make verify", "error", record["error"]])
            continue
        rows.append([f"make verify, {record['tier']} tier", f"{record['seconds_total']:.0f} s",
                     f"{record.get('machine', '')}; verdict {record.get('verdict', '?')}"])
        for case, entry in record.get("cpu_model", {}).items():
            rows.append([f"CPU model cases/s, {case}", f"{entry['cases_per_s']:,.0f}", record.get("machine", "")])
    lines = ["Harness throughput:", ""] + _table(["measurement", "value", "where / what"], rows)
    lines += ["", f"CPU tier of make verify under 10 minutes: {_verdict(targets['cpu_verify_under_10_min']['met'])}; "
                  f"exhaustive sweep of each primitive under 60 s: "
                  f"{_verdict(targets['exhaustive_sweep_under_60_s']['met'])}."]
    return lines


def speed_lines(results):
    """Markdown lines: the speed check's reference and margin (properties/bench/speed_record.py), or nothing for a
    file without them."""
    part = results.get(SPEED_SECTION)
    if not part:
        return []
    if "error" in part:
        return ["", f"Speed check: no reference measured ({part['error']})."]
    floor = speed_record.floor_of(speed_record.read_records(speed_record.spread_paths()), results["provenance"]["gpu"])
    _, margin = speed_record.reference_and_margin(results, "this record", floor)
    return ["", f"Speed check (python -m properties.tools.speed, in make verify-deep): a shape fails when slower than "
                f"its reference here by more than its {margin.line('this record')}; {part['how']} (the rounds' "
                f"widest: {part['spread']['shape']}, {part['spread']['relative']:.2%}); the check takes the floor "
                f"anew from the committed spread records; a figure is {part['method']}."]


def readme_table(results):
    """The README's benchmark section body (markdown) for one results file."""
    check_schema(results)
    lines = [f"Measured on {_provenance_line(results)}.", ""]
    lines += timing_tables(results) + [""] + information_table(results) + target_tables(results) + eager_table(results)
    lines += ncu_table(results) + [""] + resource_table(results) + [""] + harness_table(results) + speed_lines(results)
    return "\n".join(lines) + "\n"

