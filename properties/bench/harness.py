"""The harness's own throughput: engine cases per second on the GPU, NumPy model cases per second on the CPU,
the recorded exhaustive sweep times, and the wall time of `make verify` on this machine."""

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from kernel.layout import EXPERTS
from oracles.numpy_model import route as model_route
from oracles.numpy_model import routing_metadata
from common.provenance import REPO_ROOT, commit, host, utc_now
from properties.bench.problem import SCALE, SEED, draw
from properties.engine.cases import RoutingCase

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
    return [draw(rng, b) for _ in range(n)]


HARNESS_TILE = 8
HARNESS_CASES = ((f"b=8, metadata tile {HARNESS_TILE}", 8, True), ("b=1, no metadata", 1, False))


def gpu_differential_rate(seconds):
    """Engine cases per second on the kernel: fresh poisoned buffers, one route, the NumPy model, bitwise
    compare of the whole buffers."""
    from properties.engine import device

    out = {}
    for label, b, with_meta in HARNESS_CASES:
        request = (HARNESS_TILE, 0, EXPERTS) if with_meta else (None, 0, 0)
        cases = [RoutingCase(logits, bias, np.float32(SCALE), True, *request, f"harness {label}")
                 for logits, bias in _case_pool(b)]

        def one(i, cases=cases):
            if device.route(cases[i % len(cases)]).mismatches():
                raise RuntimeError("a differential case mismatched while timing the harness")

        out[label] = {"cases_per_s": _rate(one, seconds), "what": "properties.engine.device.route(case).mismatches(): "
                                                                  "buffers, poison, route, NumPy model, bitwise "
                                                                  "compare (one process)"}
    return out


def cpu_model_rate(seconds):
    """NumPy model cases per second on one process: route (and metadata) of one case, no GPU."""
    out = {}
    for label, b, with_meta in HARNESS_CASES:
        pool = _case_pool(b)

        def one(i, pool=pool, with_meta=with_meta):
            ids, _ = model_route(*pool[i % len(pool)], SCALE, True)
            if with_meta:
                routing_metadata(ids, 0, EXPERTS, HARNESS_TILE)

        out[label] = {"cases_per_s": _rate(one, seconds), "what": f"NumPy model only, {host()['cpu']}"}
    return out


def exhaustive_sweep():
    """The H200 sweep times recorded by the primitives' exhaustive proof (not re-measured here)."""
    path = REPO_ROOT / "oracles" / "mufu" / "data" / "exhaustive-proof.json"
    record = json.loads(path.read_text())
    return {"source": f"{path.relative_to(REPO_ROOT)} ({record['provenance']['gpu']}, {record['provenance']['date']})",
            "seconds": {name: r["seconds"] for name, r in record["results"].items()},
            "inputs": {name: r["inputs"] for name, r in record["results"].items()}}


def time_verify(out_path):
    """Wall time of `make verify`'s recipe on this machine (the FlashInfer oracle build, then the gate),
    with the environment already set up; writes a verify record to ``out_path``."""
    steps = [[sys.executable, "-m", "oracles.flashinfer_routing"]]
    with tempfile.TemporaryDirectory() as reports:
        steps.append([sys.executable, "-m", "properties.tools.gate", "--reports", reports])
        machine = host()
        start, codes = time.perf_counter(), []
        for step in steps:
            codes.append(subprocess.call(step, cwd=REPO_ROOT))
        seconds = time.perf_counter() - start
        summary = json.loads((Path(reports) / "verify.json").read_text())
    record = {"tier": summary["tier"], "verdict": summary["verdict"], "seconds_total": round(seconds, 1),
              "seconds_pytest": summary["seconds"], "exit_codes": codes, "commands": [" ".join(s) for s in steps],
              "machine": f"{machine['cpu']}, {machine['cores']} cores, load average at start {machine['load_average']}",
              "note": "the CPU may be shared with other processes; the load average says how busy it was",
              "commit": commit(), "date": utc_now()}
    record["cpu_model"] = cpu_model_rate(2.0)
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
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
