"""``make bench``: the routing kernel against the Triton and FlashInfer routing kernels and PyTorch eager,
for b = 1..8 tokens, and the harness's own throughput. Results go to one JSON file with provenance.

    python -m properties.bench [--out FILE] [--verify-record FILE ...]   # results to FILE (default reports/bench.json)
    python -m properties.bench --readme-table FILE [--update-readme]   # the tables of properties/results/README.md
    python -m properties.bench --time-verify [--out FILE]              # `make verify`'s wall time on this machine
                                                                       # (default reports/verify-time.json)
    python -m properties.bench --speed-rounds N ...                    # the speed check's rounds (default 5)

Nothing committed is written unless the command line names it: the committed record is refreshed with
``--out properties/results/bench.json`` (``make bench BENCH_OUT=...``), the README tables with
``--update-readme``. Every argument is checked before any work (one line naming it, exit 2).

Method. Each variant (properties/bench/results_file.py VARIANTS) is captured ``--iterations`` times back to back into one
CUDA graph; each replay is timed with CUDA events and divided by the launch count; median and minimum over
``--repeats`` replays. Before timing, the graph's outputs are poisoned, the graph replayed once and every
output compared with its reference (the NumPy model bit for bit; FlashInfer's enqueued result with the
oracle entry; FlashInfer's fused routing from logits, the peer, its ids with the model and its metadata with
the oracle entry, its weights' differences from the model recorded as information), so no timed graph skips
its work. The PDL chain puts a producer kernel (it writes the logits,
or the ids for FlashInfer alone, after letting dependents launch) before every routing launch, and reports
(producer + routing) minus the producer alone. Nsight Compute, where it runs, gives each kernel's own
duration (one ncu pass over eager launches). The eager route() call is timed on the host with its parts, the
same call through the torch op (torch.ops.musespark.route, kernel/op.py) beside it, and the floor under any launch
issued from Python (properties/bench/floor.py: an empty kernel launched through ctypes into the driver). The speed
check's section (properties/bench/speed_record.py): ``--speed-rounds`` processes, one after the other, each timing
every shape of the kernel (properties/bench/speed.py), their median per shape the reference, the margin the larger
of twice their widest spread and the floor: twice the widest spread between processes of the committed spread
record of this GPU model (properties/results/speed-spread-*.json; of any card's where none names it), both
stated. Every measurement is recorded, or its error: one failure does not stop the run. Set GIT_COMMIT on a machine
whose copy of the tree has no .git.
"""

if __name__ == "__main__":  # Ctrl-C while the imports below load: one line, never a traceback
    from common.interrupts import at_start
    at_start("python -m properties.bench")

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from kernel import routing
from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS
from common import interrupts
from oracles.flashinfer_routing import build
from common.provenance import REPO_ROOT, host, nvidia_smi, version
from common.provenance import record as provenance_record
from properties.bench import results_file, speed_record
from properties.bench.floor import launch_floor
from properties.bench.harness import cpu_model_rate, exhaustive_sweep, gpu_differential_rate, time_verify, verify_record
from properties.bench.ncu import ncu_workload, run_ncu
from properties.bench.problem import Config, Problem
from properties.bench.results_file import VARIANT_NAMES, VARIANTS
from properties.bench.timing import Recorder, bench_problem, eager_parts, eager_us, error_line, resources
from common import args as types
from common.args import OneLineParser

DEFAULT_OUT = REPO_ROOT / "reports" / "bench.json"
DEFAULT_VERIFY_OUT = REPO_ROOT / "reports" / "verify-time.json"
MAX_COUNT = 10**7  # launches, replays and calls: far above any useful figure, far below an endless run
MAX_SPEED_ROUNDS = 100
# Queried one at a time: a field this driver's nvidia-smi lacks costs only its own entry.
CLOCK_FIELDS = ("clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem", "clocks.applications.graphics",
                "pstate", "temperature.gpu", "power.draw", "clocks_event_reasons.active")


def clocks():
    """The GPU's clocks and state now, from nvidia-smi (each field, or its error)."""
    out = {}
    for field in CLOCK_FIELDS:
        try:
            out[field] = nvidia_smi(field)
        except Exception as exc:  # noqa: BLE001 - recorded, not fatal
            out[field] = f"unavailable: {error_line(exc)}"
    return out


def provenance():
    """The provenance record (common/provenance.py: GPU, driver, CUDA, package versions, commit, date) of this run
    (on a CUDA device), with the clocks, the host and the FlashInfer libraries it timed."""
    prov = provenance_record()
    prov.update({"nvidia-cutlass-dsl": version("nvidia-cutlass-dsl") or "not installed",
                 "flashinfer": f"flashinfer-python {version('flashinfer-python') or 'not installed'} at run time; "
                               f"libraries build/flashinfer_oracle/{build.LIBRARY.name} and "
                               f"{build.FUSED_LIBRARY.name} from {build.FLASHINFER_VERSION} sources",
                 "clocks": {"before": clocks()}, "host": host()})
    return prov


def run(args):
    if not torch.cuda.is_available():
        print("properties.bench: no CUDA device: the benchmark runs on a GPU (--readme-table and --time-verify do "
              "not need one)", file=sys.stderr)
        return 2
    started = time.perf_counter()
    rec = Recorder()
    cfg = Config.from_args(args)
    results = {"schema": results_file.SCHEMA, "provenance": provenance(),
               "config": cfg.as_dict(), "variants": dict(VARIANTS),
               "graph": {n: {} for n in VARIANT_NAMES}, "pdl_chain": {n: {} for n in VARIANT_NAMES},
               "verify": {n: {} for n in VARIANT_NAMES}}
    results["pdl_chain"]["producer"] = {"logits": {}, "ids": {}}
    results["eager"] = {name: {} for name in results_file.EAGER_VARIANTS + results_file.EAGER_OP_VARIANTS}
    results["eager_parts"] = {name: {} for name in results_file.EAGER_VARIANTS}
    results["information"] = {name: {} for name in results_file.INFORMATION_VARIANTS}
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
        for name in results_file.EAGER_VARIANTS + results_file.EAGER_OP_VARIANTS:
            results["eager"][name][str(b)] = rec.attempt(f"eager {name} b={b}", eager_us, problem.eager_call(name),
                                                         args.eager_calls)
        for name in results_file.EAGER_VARIANTS:
            results["eager_parts"][name][str(b)] = rec.attempt(f"eager parts {name} b={b}", eager_parts, problem,
                                                               name, args.eager_calls)
        for name, info in measured["information"].items():
            results["information"][name][str(b)] = info
        for target, stat in measured["producer"].items():
            results["pdl_chain"]["producer"][target][str(b)] = stat
        print(f"  b={b}: " + ", ".join(f"{n} {_short(measured['graph'][n])}" for n in VARIANT_NAMES), flush=True)
        if first_problem is None:
            first_problem = problem
    if args.speed_rounds:
        results[speed_record.SECTION] = rec.attempt("speed check rounds", speed_rounds, args.speed_rounds,
                                                    results["provenance"]["gpu"])
    results["launch_floor"] = rec.attempt("launch floor", launch_floor, args.eager_calls)
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
    results["targets"] = results_file.evaluate_targets(results)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print()
    print(rec.attempt("results table", results_file.readme_table, results))
    print(f"{len(rec.errors)} measurement errors; {results['seconds']} s; results in {out}")
    return 1 if rec.errors else 0


SPEED_ROUND = "properties.bench.speed"
SPEED_ROUND_TIMEOUT_S = 600


def speed_rounds(rounds, gpu):
    """The speed check's section (properties/bench/speed_record.py): ``rounds`` runs of ``python -m
    properties.bench.speed``, each a process of its own, one after the other, with the margin's floor of the
    committed spread records (properties/results/speed-spread-*.json) for ``gpu``; RuntimeError naming a round that
    failed or ran on another GPU (a malformed spread record: RecordError, before any round runs)."""
    floor = speed_record.floor_of(speed_record.read_records(speed_record.spread_paths()), gpu)
    figures, method = [], None
    with tempfile.TemporaryDirectory() as folder:
        for i in range(rounds):
            out = Path(folder) / f"round-{i}.json"
            done = subprocess.run([sys.executable, "-m", SPEED_ROUND, "--out", str(out)], cwd=REPO_ROOT,
                                  capture_output=True, text=True, timeout=SPEED_ROUND_TIMEOUT_S)
            if done.returncode:
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                raise RuntimeError(f"speed round {i + 1} of {rounds} exited {done.returncode}: {last}")
            made = json.loads(out.read_text())
            if made["gpu"] != gpu:
                raise RuntimeError(f"speed round {i + 1} ran on {made['gpu']}, not {gpu}")
            figures.append(made["figures_us"])
            method = made["method"]
            print(f"  speed round {i + 1} of {rounds}: done", flush=True)
    return speed_record.section(figures, method, floor)


def _short(entry):
    return "error" if "error" in entry else f"{entry['median_us']:.2f}"


RESULTS_README = REPO_ROOT / "properties" / "results" / "README.md"


def readme(args):
    body = results_file.readme_table(args.results)
    if args.update_readme:
        RESULTS_README.write_text(results_file.README_BLOCK.replace(RESULTS_README.read_text(), body))
    print(body, end="")
    return 0


def _results(parser, path):
    """The results file ``path`` checked against the schema; a one-line error naming --readme-table if not."""
    try:
        return results_file.check_schema(types.read_json_object(path))
    except (argparse.ArgumentTypeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        parser.error(f"argument --readme-table: {path}: {exc}")


def _check_verify_records(parser, paths):
    for path in paths:
        try:
            verify_record(path)
        except (KeyError, TypeError) as exc:
            parser.error(f"argument --verify-record: {path}: not a --time-verify record or gate report (lacks {exc})")


def parse_args(argv):
    parser = OneLineParser(prog="python -m properties.bench", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--readme-table", metavar="FILE", type=types.json_object_file,
                      help="print the README tables of a results file")
    mode.add_argument("--time-verify", action="store_true", help="time `make verify`'s recipe; record to --out")
    mode.add_argument("--ncu-workload", metavar="LABELS", type=types.output_file, help=argparse.SUPPRESS)
    parser.add_argument("--update-readme", action="store_true",
                        help="with --readme-table: rewrite the block of properties/results/README.md")
    parser.add_argument("--out", type=types.output_file,
                        help=f"results file (default {DEFAULT_OUT}; with --time-verify {DEFAULT_VERIFY_OUT})")
    tokens, count = types.integer(1, MAX_TOKENS), types.integer(1, MAX_COUNT)
    parser.add_argument("--b", dest="bs", type=tokens, nargs="+", default=list(range(1, MAX_TOKENS + 1)))
    parser.add_argument("--iterations", type=count, default=1000, help="launches per CUDA graph")
    parser.add_argument("--repeats", dest="repetitions", type=count, default=20, help="timed replays per graph")
    parser.add_argument("--eager-calls", type=count, default=2000, help="eager route() calls timed per b and variant")
    parser.add_argument("--tile", dest="tile_n", type=types.integer(1, MAX_TILE), default=8)
    parser.add_argument("--local-expert-offset", type=types.integer(0, EXPERTS), default=0)
    parser.add_argument("--num-local-experts", type=types.integer(0, EXPERTS), default=EXPERTS)
    parser.add_argument("--no-ncu", action="store_true", help="skip the Nsight Compute pass")
    parser.add_argument("--ncu-b", dest="ncu_bs", type=tokens, nargs="+", default=[1, MAX_TOKENS])
    parser.add_argument("--ncu-launches", type=count, default=3, help="profiled launches per variant and b")
    parser.add_argument("--harness-seconds", type=types.number(above=0, maximum=3600), default=3.0,
                        help="time per harness throughput figure")
    parser.add_argument("--speed-rounds", type=types.integer(0, MAX_SPEED_ROUNDS), default=5,
                        help="processes that each time every shape for the speed check's reference and margin "
                             "(0: none, the record then holds no speed section)")
    parser.add_argument("--verify-record", action="append", default=[], type=types.json_object_file,
                        help="a --time-verify record (or several) to include")
    args = parser.parse_args(argv)
    if args.local_expert_offset + args.num_local_experts > EXPERTS:
        parser.error(f"--local-expert-offset + --num-local-experts must be at most {EXPERTS}, got "
                     f"{args.local_expert_offset} + {args.num_local_experts}")
    if args.speed_rounds == 1:
        parser.error("argument --speed-rounds: a margin needs at least 2 rounds (0 for none), got 1")
    if args.update_readme and not args.readme_table:
        parser.error("--update-readme needs --readme-table FILE")
    if args.update_readme and results_file.README_BLOCK.read(RESULTS_README.read_text()) is None:
        parser.error(f"--update-readme: {RESULTS_README} has no {results_file.README_BLOCK.begin} block")
    _check_verify_records(parser, args.verify_record)
    args.results = _results(parser, args.readme_table) if args.readme_table else None
    if args.out is None:
        args.out = DEFAULT_VERIFY_OUT if args.time_verify else DEFAULT_OUT
        if not args.readme_table:
            types.check_output_of(parser, "--out", args.out)
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
    sys.exit(interrupts.run("python -m properties.bench", main))
