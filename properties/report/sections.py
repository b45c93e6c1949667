"""What each section of the report shows, from its JSON files: plain dicts and lists for the template and the
plots (no matplotlib, no HTML here). Every number shown comes from the file; nothing is recomputed but ratios."""

import math
import os

from properties.bench.results_file import MODES, SUBJECT, TARGETS, evaluate_targets, file_variants
from properties.mutants import freshness
from properties.report.sources import is_soak_bench

# The FlashInfer variants the subject is compared with (every one that a user could run instead).
FLASHINFER_BASELINES = ("flashinfer", "flashinfer_pdl", "triton+flashinfer", "triton+flashinfer_pdl",
                        "flashinfer_fused")
MODE_TITLES = {"graph": "CUDA-graph replay", "pdl_chain": "PDL chain behind a producer"}
# Keys under which a per-implementation verdict holds a distribution: ulp distance (decimal string) -> count.
ULP_KEYS = ("ulp", "ulp_counts", "ulp_distribution", "ulp_histogram")


def _origin(source):
    return "recorded result" if source.recorded else "this machine's run"


def _file(source, page_dir):
    """How the page names and links a source file (a path relative to the page)."""
    return {"name": source.path.name, "href": os.path.relpath(source.path, page_dir), "origin": _origin(source)}


def _time(entry):
    value = (entry or {}).get("median_us")
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


# ------------------------------------------------------------------------------------------------- verify

def verify(source, page_dir):
    """The gate's verdict, its reasons and one row per part."""
    d = source.data
    tests = d["tests"]
    parts = []
    for name, g in sorted(tests["groups"].items()):
        parts.append({"name": name, "passed": g["passed"], "failed": g["failed"], "skipped": g["skipped"],
                      "cases": g.get("cases", 0), "seconds": g.get("seconds", 0.0),
                      "skips": [f"{n} x {r}" for r, n in g.get("skip_reasons", {}).items()],
                      "failures": list(g.get("failures", []))})
    build = d.get("flashinfer_build", {})
    env = d.get("environment", {})
    return {
        "file": _file(source, page_dir), "verdict": d["verdict"], "reasons": d["reasons"], "tier": d["tier"],
        "gpu": d.get("gpu"), "profile": d.get("hypothesis_profile"), "require_gpu": d.get("require_gpu"),
        "seconds": d.get("seconds"), "pytest_args": " ".join(d.get("pytest_args", [])),
        "flashinfer_build": build.get("why", ""), "oracles_not_run": d.get("oracles_not_run", {}),
        "mufu_tables": (d.get("mufu_tables") or {}).get("why", ""),
        "mufu_certified_on": (d.get("mufu_tables") or {}).get("certified_on", []),
        "named_skips": tests.get("named_skips", {}), "unnamed_skips": tests.get("unnamed_skips", []),
        "gpu_checks_not_run": tests.get("gpu_checks_not_run"), "finished": tests.get("finished"),
        "environment": {"GPU": env.get("gpu") or "none", "driver": env.get("driver"), "CUDA": env.get("cuda"),
                        "commit": (env.get("commit") or "")[:12], "date": env.get("date"),
                        **{k: v for k, v in env.get("packages", {}).items() if v}},
        "parts": parts,
        "totals": {k: sum(p[k] for p in parts) for k in ("passed", "failed", "skipped", "cases")},
    }


# -------------------------------------------------------------------------------------------------- bench

def bench(source, page_dir):
    """Per-launch times per variant and b in both modes, the subject's ratio to each FlashInfer baseline,
    the targets' verdicts."""
    r = source.data
    bs = r["config"]["bs"]
    names = file_variants(r)
    targets = evaluate_targets(r)
    modes = []
    for mode in MODES:
        times = {n: [_time(r[mode][n].get(str(b))) for b in bs] for n in names}
        ratios = {}
        for base in (n for n in FLASHINFER_BASELINES if n in names):
            ratios[base] = [t / s if t is not None and s is not None and s > 0 else None
                            for t, s in zip(times[base], times[SUBJECT])]
        modes.append({
            "mode": mode, "title": MODE_TITLES[mode], "times": times, "ratios": ratios,
            "rows": [{"b": b, "cells": [times[n][i] for n in names],
                      "ratios": [{"value": ratios[n][i], "class": _against_target(n, ratios[n][i])} for n in ratios]}
                     for i, b in enumerate(bs)],
            "targets": [{"label": label, "factor": factor, "met": targets[mode][label]["met"],
                         "per_b": [targets[mode][label]["per_b"][str(b)] for b in bs]}
                        for label, _, factor in TARGETS],
        })
    p = r["provenance"]
    return {"file": _file(source, page_dir), "bs": bs, "variants": [(n, r["variants"].get(n, "")) for n in names],
            "subject": SUBJECT, "baselines": list(modes[0]["ratios"]), "modes": modes,
            "factors": {label: factor for label, _, factor in TARGETS},
            "config": r["config"],
            "provenance": {"GPU": p["gpu"], "driver": p["driver"], "CUDA": p["cuda"], "torch": p["torch"],
                           "Triton": p["triton"], "CUTLASS DSL": p["nvidia-cutlass-dsl"],
                           "commit": p["commit"][:12], "date": p["date"]},
            "errors": r.get("errors", [])}


def _against_target(baseline, ratio):
    """'ok' or 'bad' for a ratio over a baseline some target names (reached or not), '' otherwise."""
    factors = [factor for _, names, factor in TARGETS if baseline in names]
    if ratio is None or not factors:
        return ""
    return "ok" if ratio >= factors[0] else "bad"


def peer_ulp(source):
    """The FlashInfer peer's weights against the model per b (bench ``information``): weights, how many differ
    in bits, the largest distance in ulp, and the distribution where the file holds one; None without it."""
    info = source.data.get("information", {}).get("flashinfer_fused")
    if not info:
        return None
    rows = []
    for b in source.data["config"]["bs"]:
        e = info.get(str(b)) or {"error": "not recorded"}
        if "error" in e:
            rows.append({"b": b, "error": e["error"]})
            continue
        counts = e.get("ulp_counts")
        rows.append({"b": b, "error": None, "kernel": e["kernel"], "weights": e["weights"], "differ": e["bits_differ"],
                     "max_ulp": e["max_ulp"], "counts": {int(k): v for k, v in counts.items()} if counts else None})
    return {"rows": rows, "distribution": all(r.get("counts") for r in rows if not r["error"])}


# ------------------------------------------------------------------------------------------------ verdicts

def ulp_distributions(data, path=()):
    """[(label, {ulp distance: count})] for every mapping under a key of ULP_KEYS anywhere in ``data`` (the
    hook for per-implementation verdicts: any file layout works that keeps its distributions under such a
    key), labelled by the keys leading to it."""
    found = []
    if isinstance(data, dict):
        for key, value in data.items():
            if key in ULP_KEYS and isinstance(value, dict) and _is_distribution(value):
                found.append((" / ".join(path) or "all", {int(k): int(v) for k, v in value.items()}))
            else:
                found += ulp_distributions(value, (*path, str(key)))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found += ulp_distributions(value, (*path, str(i)))
    return found


def _is_distribution(value):
    return bool(value) and all(str(k).lstrip("-").isdigit() and isinstance(v, int) for k, v in value.items())


def verdict(source, page_dir):
    """A per-implementation verdict file: its implementation and every ulp distribution it holds."""
    d = source.data
    distributions = [{"label": label, "counts": counts, "total": sum(counts.values()),
                      "differ": sum(n for u, n in counts.items() if u != 0), "max_ulp": max(counts)}
                     for label, counts in ulp_distributions(d)]
    return {"file": _file(source, page_dir), "implementation": d.get("implementation") or source.path.stem,
            "verdict": d.get("verdict"), "distributions": distributions}


# ------------------------------------------------------------------------------------------------ mutants

def mutants(source, page_dir):
    """The kernel's evidence record (properties/mutants/freshness.py): its verdict, its count of each verdict,
    the refresh that made it (counts and wall time, where it records them) and whether it is fresh for this tree
    (freshness.status)."""
    d = source.data
    total = d["score"]["total"]
    fresh, line = freshness.status(d, freshness.inputs())
    provenance = d["provenance"]
    refresh = d.get("refresh")
    return {"file": _file(source, page_dir), "verdict": d["verdict"], "tier": d["tier"], "complete": d.get("complete"),
            "score": total.get("score"), "sites": total.get("sites"), "mutants": total.get("mutants"),
            "counts": [(k, v) for k, v in total.items() if k not in ("score", "sites", "mutants")],
            "fresh": fresh, "freshness": line, "gpu": provenance.get("gpu"),
            "commit": (provenance.get("commit") or "")[:12], "finished": d.get("finished"),
            "refresh": None if refresh is None else {
                "seconds": refresh["seconds"],
                "counts": [(k.replace("_", " "), v) for k, v in refresh.items()
                           if k not in ("seconds", "seed", "actions", "results")],
                "results": sorted(refresh.get("results", {}).items()), "seed": refresh.get("seed")},
            "survivors": d.get("survivors", []), "failures": d.get("failures", [])}


def harness_mutants(source, page_dir):
    """The harness's mutant catalog: one row per mutant with its target, verdict and the test that killed it."""
    d = source.data
    rows = []
    for m in d["mutants"]:
        killers = [(t, detail) for t, detail in m.get("tests", {}).items() if t in m.get("killers", [])]
        killers = killers or list(m.get("tests", {}).items())
        rows.append({"mutant": m["mutant"], "target": m.get("target", ""), "description": m.get("description", ""),
                     "verdict": m["verdict"], "class": "ok" if m["verdict"] == "killed" else "bad",
                     "tests": [{"test": t, "how": str(detail).splitlines()[0] if detail else ""}
                               for t, detail in killers]})
    by_target = {}
    for row in rows:
        by_target.setdefault(row["target"], {}).setdefault(row["verdict"], 0)
        by_target[row["target"]][row["verdict"]] += 1
    return {"file": _file(source, page_dir), "verdict": d["verdict"], "rows": rows, "by_target": by_target,
            "killed": sum(r["verdict"] == "killed" for r in rows), "commit": (d.get("commit") or "")[:12],
            "finished": d.get("finished"), "failures": d.get("failures", []),
            "verdicts": sorted({r["verdict"] for r in rows})}


# --------------------------------------------------------------------------------------------------- soak

def soak(sources, page_dir):
    """The soak files side by side: each run's rows, rate and disagreements per implementation; its rows per
    family and per variant in one table each (a column per run); --bench files as rows/s tables."""
    runs, benches = [], []
    for source in sources:
        d = source.data
        p = d.get("provenance", {})
        head = {"file": _file(source, page_dir), "GPU": p.get("gpu"), "commit": (p.get("commit") or "")[:12],
                "date": p.get("date")}
        if is_soak_bench(d):
            benches.append({**head, "rows": d["bench"]})
            continue
        tally, run = d["tally"], d.get("this_run", {})
        seconds = sum(c.get("seconds", 0) for c in d.get("chunks", [])) or run.get("seconds")
        runs.append({**head, "rows": tally["rows"], "batches": tally.get("batches"), "target_rows": d.get("target_rows"),
                     "done": d.get("done"), "seed": d.get("seed"), "seconds": seconds,
                     "rate": int(tally["rows"] / seconds) if seconds else None,
                     "ranks": run.get("world_size"), "backend": run.get("backend"),
                     "crosscheck_rows": tally.get("crosscheck_rows"),
                     "disagreements": sorted(tally["disagreements"].items()),
                     "disagreeing": sum(tally["disagreements"].values()),
                     "model_mismatches": len(d.get("model_mismatches", [])),
                     "case_files": [{"name": os.path.basename(c),
                                     "href": os.path.relpath(c, page_dir) if os.path.isfile(c) else None}
                                    for c in d.get("case_files", [])],
                     "families": tally["rows_by_family"], "variants": tally["rows_by_variant"]})
    return {"runs": runs, "benches": benches,
            "families": _keys(r["families"] for r in runs), "variants": sorted(_keys(r["variants"] for r in runs))}


def _keys(mappings):
    """Every key of ``mappings``, in the order first seen."""
    return list(dict.fromkeys(k for m in mappings for k in m))
