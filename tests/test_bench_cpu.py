"""The benchmark's pure parts without a GPU: the results schema, the targets, the README tables, the Nsight
Compute CSV reader, the CLI's argument checks, and the committed results file against the README."""

import json
from pathlib import Path

import numpy as np
import pytest

from properties.bench import cli, harness, host_clock, ncu, timing
from properties.bench import results_file, speed_record
from properties.bench.results_file import VARIANT_NAMES

from helpers import DIV_PAIRS, PRIMITIVES_SWEPT

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "properties" / "results" / "bench.json"


def _entry(median):
    return {"median_us": median, "min_us": median * 0.9, "samples_us": [median]}


def synthetic(times, bs=(1, 8), chain_times=None):
    """A results dict in the benchmark's schema: ``times[name](b)`` is each variant's median (µs)."""
    chain_times = chain_times or times
    results = {
        "schema": results_file.SCHEMA,
        "provenance": {"gpu": "GPU", "driver": "1", "cuda": "13.0", "clocks": {"before": {"clocks.sm": "1980 MHz"}},
                       "torch": "t", "triton": "3.6.0", "nvidia-cutlass-dsl": "4.8.1", "commit": "abc", "date": "d"},
        "config": {"bs": list(bs), "iterations": 1000, "repetitions": 20, "tile_n": 8, "local_expert_offset": 0,
                   "num_local_experts": 256},
        "variants": dict(results_file.VARIANTS),
        "graph": {n: {str(b): _entry(times[n](b)) for b in bs} for n in VARIANT_NAMES},
        "pdl_chain": {n: {str(b): _entry(chain_times[n](b)) for b in bs} for n in VARIANT_NAMES},
        "verify": {n: {str(b): {"graph": "ok", "pdl_chain": "ok"} for b in bs} for n in VARIANT_NAMES},
        "ncu": {"available": False, "reason": "not in this test"},
        "resources": {"cute": {"registers": 40, "shared_bytes": 0, "local_bytes": 0, "stack_bytes": 0}},
        "harness": {"exhaustive_sweep": {"seconds": {"sigmoid_f32": 1.2}},
                    "verify_records": [{"tier": "cpu", "seconds_total": 120.0, "verdict": "PASS"}]},
        "errors": [],
    }
    results["pdl_chain"]["producer"] = {"logits": {str(b): _entry(1.0) for b in bs}}
    return results


def constant(value):
    return lambda b: value


BASE = {n: constant(4.0) for n in VARIANT_NAMES}


def test_schema_accepts_a_complete_file_and_names_what_is_missing():
    results = synthetic(BASE)
    assert results_file.check_schema(results) is results
    del results["ncu"]
    with pytest.raises(ValueError, match="ncu"):
        results_file.check_schema(results)
    results = synthetic(BASE)
    del results["graph"]["triton"]["8"]
    with pytest.raises(ValueError, match=r"graph\.triton"):
        results_file.check_schema(results)
    results = synthetic(BASE)
    results["pdl_chain"]["cute"]["1"] = {"min_us": 1.0}
    with pytest.raises(ValueError, match=r"pdl_chain\.cute\[1\]"):
        results_file.check_schema(results)


def test_targets_take_the_faster_baseline_and_need_every_b():
    times = dict(BASE, cute_meta=constant(2.0), flashinfer=constant(3.2),
                 flashinfer_pdl=lambda b: 3.0 if b == 1 else 2.5,  # 1.5x and 1.25x: the target is 1.3x
                 **{"triton+flashinfer": constant(5.0), "triton+flashinfer_pdl": constant(4.0)})
    targets = results_file.evaluate_targets(synthetic(times))
    fi = targets["graph"]["vs FlashInfer alone"]
    assert fi["per_b"]["1"]["baseline"] == "flashinfer_pdl" and fi["per_b"]["1"]["speedup"] == 3.0 / 2.0
    assert fi["per_b"]["1"]["met"] is True and fi["per_b"]["8"]["met"] is False and fi["met"] is False
    chain = targets["graph"]["vs Triton then FlashInfer"]
    assert chain["met"] is True and chain["per_b"]["8"]["speedup"] == 4.0 / 2.0


def test_a_missing_time_or_a_hidden_launch_leaves_the_target_undetermined():
    results = synthetic(dict(BASE, cute_meta=constant(1.0)), chain_times=dict(BASE, cute_meta=constant(-0.1)))
    results["graph"]["flashinfer"]["8"] = {"error": "boom"}
    results["graph"]["flashinfer_pdl"]["8"] = {"error": "boom"}
    targets = results_file.evaluate_targets(results)
    assert targets["graph"]["vs FlashInfer alone"]["met"] is None
    assert targets["graph"]["vs Triton then FlashInfer"]["met"] is True
    assert targets["pdl_chain"]["vs FlashInfer alone"]["met"] is None


def test_cpu_verify_and_sweep_targets_follow_the_records():
    results = synthetic(BASE)
    targets = results_file.evaluate_targets(results)
    assert targets["cpu_verify_under_10_min"]["met"] is True
    assert targets["exhaustive_sweep_under_60_s"]["met"] is True
    results["harness"]["verify_records"].append({"tier": "cpu", "seconds_total": 601.0})
    results["harness"]["exhaustive_sweep"]["seconds"]["rcp"] = 60.0
    targets = results_file.evaluate_targets(results)
    assert targets["cpu_verify_under_10_min"]["met"] is False
    assert targets["exhaustive_sweep_under_60_s"]["met"] is False
    results["harness"] = {}
    targets = results_file.evaluate_targets(results)
    assert targets["cpu_verify_under_10_min"]["met"] is None


def test_readme_table_has_a_row_per_b_with_each_median_and_minimum():
    times = {n: (lambda i: lambda b: 1.0 + i + b / 100)(i) for i, n in enumerate(VARIANT_NAMES)}
    text = results_file.readme_table(synthetic(times))
    for b in (1, 8):
        row = next(line for line in text.splitlines() if line.startswith(f"| {b} | "))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1:] == [f"{times[n](b):.2f} ({times[n](b) * 0.9:.2f})" for n in VARIANT_NAMES]
    assert "Nsight Compute: unavailable (not in this test)" in text
    assert "commit abc" in text


def test_readme_block_is_replaced_in_place_and_a_readme_without_one_is_refused():
    block = results_file.README_BLOCK
    readme = f"# Title\n\n{block.begin}\nold\n{block.end}\n\ntext\n"
    once = block.replace(readme, "table one\n")
    assert block.read(once) == "table one" and once.replace("table one", "old") == readme
    twice = block.replace(once, "table two\n")
    assert block.read(twice) == "table two" and twice.count(block.begin) == 1
    assert block.read("# Title\n") is None
    with pytest.raises(ValueError, match="bench-table:begin"):
        block.replace("# Title\n", "table")


# ncu --csv output: ncu's own "==PROF==" lines, then one quoted row per kernel and metric.
NCU_CSV = """==PROF== Connected to process 123
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","123","python3","h","kernel_cutlass_kernel_kernelrouting_Routing_object_at_x","1","7","(256, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","2,496"
"0","123","python3","h","kernel_cutlass_kernel_kernelrouting_Routing_object_at_x","1","7","(256, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","launch__registers_per_thread","register/thread","40"
"1","123","python3","h","_routing_kernel","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","3.5"
"1","123","python3","h","_routing_kernel","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","launch__registers_per_thread","register/thread","n/a"
==PROF== Disconnected from process 123
"""


def test_ncu_csv_is_read_per_kernel_in_microseconds():
    kernels = ncu.parse_ncu_csv(NCU_CSV)
    assert [name for name, _ in kernels] == ["kernel_cutlass_kernel_kernelrouting_Routing_object_at_x", "_routing_kernel"]
    assert kernels[0][1] == {"gpu__time_duration.sum": 2.496, "launch__registers_per_thread": 40.0}
    assert kernels[1][1] == {"gpu__time_duration.sum": 3.5, "launch__registers_per_thread": "n/a"}


def test_ncu_kernels_are_matched_to_the_workload_labels():
    kernels = ncu.parse_ncu_csv(NCU_CSV)
    out = ncu.assign_ncu(kernels, [["cute", 1], ["triton", 1]])
    assert out["cute"]["1"]["duration_us_median"] == 2.496 and out["triton"]["1"]["launches"] == 1
    with pytest.raises(RuntimeError, match="profiled 2 kernels, the workload launched 1"):
        ncu.assign_ncu(kernels, [["cute", 1]])
    with pytest.raises(RuntimeError, match="launch flashinfer b=1 profiled as '_routing_kernel'"):
        ncu.assign_ncu(kernels, [["cute", 1], ["flashinfer", 1]])


@pytest.mark.parametrize("argv, match", [
    (["--b", "9"], "1..8"),
    (["--ncu-b", "0"], "1..8"),
    (["--iterations", "0"], "argument --iterations: must be an integer in 1..10000000"),
])
def test_cli_refuses_bad_arguments(argv, match, capsys):
    with pytest.raises(SystemExit):
        cli.parse_args(argv)
    assert match in capsys.readouterr().err


def test_readme_table_cli_prints_the_table_of_a_file(tmp_path, capsys):
    path = tmp_path / "results.json"
    results = synthetic(BASE)
    path.write_text(json.dumps(results))
    assert cli.main(["--readme-table", str(path)]) == 0
    assert capsys.readouterr().out == results_file.readme_table(results)


def test_harness_figures_on_the_cpu():
    rates = harness.cpu_model_rate(0.01)
    assert {label for label, _, _ in harness.HARNESS_CASES} == set(rates)
    assert all(r["cases_per_s"] > 0 for r in rates.values())
    sweep = harness.exhaustive_sweep()
    proof = json.loads((ROOT / "oracles" / "mufu" / "data" / "exhaustive-proof.json").read_text())["results"]
    # One time per entry of the proof, and the proof's entries are the primitives it is known to cover.
    assert set(sweep["seconds"]) == set(proof) == {*PRIMITIVES_SWEPT, DIV_PAIRS}
    for name, seconds in sweep["seconds"].items():
        assert seconds == proof[name]["seconds"], name


def test_committed_results_match_the_readme():
    """The results README's benchmark block is the table of properties/results/bench.json, or absent without it."""
    block = results_file.README_BLOCK.read((ROOT / "properties" / "results" / "README.md").read_text())
    if not RESULTS.is_file():
        assert block is None, f"README has a benchmark table but {RESULTS.relative_to(ROOT)} does not exist"
        return
    results = results_file.check_schema(json.loads(RESULTS.read_text()))
    assert block == results_file.readme_table(results).strip("\n"), \
        "README's benchmark table is stale: python -m properties.bench --readme-table FILE --update-readme"


def test_a_gate_report_is_read_as_a_verify_record(tmp_path):
    path = tmp_path / "verify.json"
    path.write_text(json.dumps({"tier": "cpu+gpu", "verdict": "PASS", "seconds": 312.5, "groups": {}}))
    record = harness.verify_record(path)
    assert (record["tier"], record["verdict"], record["seconds_total"]) == ("cpu+gpu", "PASS", 312.5)
    assert "pytest time only" in record["machine"]


class FakeProblem:
    """Stands in for properties.bench.problem.Problem on a machine without a GPU: the run's bookkeeping only."""

    def __init__(self, b, cfg):
        self.b = b
        self.logits, self.logits_src, self.fi_ids, self.fi_ids_src = object(), object(), object(), object()

    def launcher(self, name):
        return lambda: None

    def eager_call(self, name):
        return lambda: None

    def producer_target(self, name):
        return (self.fi_ids_src, self.fi_ids) if name in ("flashinfer", "flashinfer_pdl") \
            else (self.logits_src, self.logits)

    def information(self, name):
        return {"kernel": "routingIndicesBlockKernel", "weights": 8 * self.b, "bits_differ": 1, "max_ulp": 1}


def test_the_run_assembles_a_complete_results_file(tmp_path, monkeypatch, capsys):
    """run() with the device work replaced by fixed per-launch samples: the file it writes passes the schema,
    the PDL chain is chain minus producer, and a failing measurement is recorded, not fatal."""
    chain_us, producer_us = 5.0, 1.5

    def fake_measure(problem, name, fn, cfg, verify, mode):
        if name == "torch" and problem.b == 8 and mode == "graph":
            raise RuntimeError("planted failure")
        verify[mode] = "ok"
        return results_file.summarize([chain_us if mode == "pdl_chain" else 3.0, 4.0])

    monkeypatch.setattr(cli.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(cli, "provenance", lambda: synthetic(BASE)["provenance"])
    monkeypatch.setattr(cli, "clocks", lambda: {"clocks.sm": "1 MHz"})
    monkeypatch.setattr(cli.routing, "prepare", lambda renormalize: None)
    monkeypatch.setattr(cli, "Problem", FakeProblem)
    monkeypatch.setattr(timing, "measure", fake_measure)
    monkeypatch.setattr(timing, "_time_fn", lambda fn, cfg: [producer_us, producer_us + 1])
    monkeypatch.setattr(cli, "resources", lambda rec, problem: {"cute": {"registers": 1, "shared_bytes": 0,
                                                                         "local_bytes": 0, "stack_bytes": 0}})
    monkeypatch.setattr(cli, "gpu_differential_rate", lambda seconds: {"b=8": {"cases_per_s": 10.0}})
    monkeypatch.setattr(cli, "eager_us", lambda run, calls: {"mean_us": 9.0, "calls": calls})
    parts = {"signature_us": 2.5, "lookup_us": 0.5, "current_device_us": 0.25, "current_stream_us": 0.125,
             "compiled_call_us": 1.0}
    monkeypatch.setattr(cli, "eager_parts", lambda problem, name, calls: {
        **parts, "compiled_call_us": 1.0 if name == "cute" else 1.5, "calls": calls})
    monkeypatch.setattr(cli, "launch_floor", lambda calls: {"cuLaunchKernel_us": 2.0, "cuLaunchKernelEx_pdl_us": 2.5,
                                                            "calls": calls})
    rounds = [{n: {str(b): 1.0 + r / 100 for m, b in speed_record.SHAPES if m == n} for n in speed_record.VARIANTS}
              for r in range(3)]
    asked = []
    monkeypatch.setattr(cli, "speed_rounds", lambda n, gpu: asked.append(gpu) or speed_record.section(rounds[:n], "x"))
    record = tmp_path / "verify.json"
    record.write_text(json.dumps({"tier": "cpu", "verdict": "PASS", "seconds_total": 40.0}))
    out = tmp_path / "bench.json"
    rc = cli.main(["--out", str(out), "--b", "1", "8", "--no-ncu", "--harness-seconds", "0.01",
                     "--verify-record", str(record), "--speed-rounds", "3"])
    eager_calls = cli.parse_args([]).eager_calls  # the run's eager figures use the CLI's default
    committed = {e["calls"] for bs in json.loads(RESULTS.read_text())["eager"].values() for e in bs.values()
                 if "error" not in e}  # a measurement that failed made no figure
    assert committed == {eager_calls}, "the committed record's eager means (the results README's eager table) " \
        "were made with the CLI's default number of calls"
    results = results_file.check_schema(json.loads(out.read_text()))
    assert rc == 1 and [e["what"] for e in results["errors"]] == ["graph torch b=8"]
    assert results["graph"]["torch"]["8"] == {"error": "RuntimeError: planted failure"}
    assert results["graph"]["cute"]["1"]["median_us"] == 3.5
    assert results[speed_record.SECTION]["rounds"] == 3 and results[speed_record.SECTION]["margin"] > 0
    assert asked == [synthetic(BASE)["provenance"]["gpu"]]  # the rounds must run on the bench's GPU
    chain = results["pdl_chain"]["flashinfer"]["8"]
    assert chain["median_us"] == (chain_us + 4.0) / 2 - (producer_us + 0.5)
    assert results["verify"]["cute_meta"]["8"] == {"graph": "ok", "pdl_chain": "ok"}
    assert results["eager"]["cute_meta"]["8"] == {"mean_us": 9.0, "calls": eager_calls}
    assert set(results["eager"]) == {"cute", "cute_meta", "cute_op", "cute_meta_op"} == \
        {name for name in results["eager"] if set(results["eager"][name]) == {"1", "8"}}
    assert results["launch_floor"] == {"cuLaunchKernel_us": 2.0, "cuLaunchKernelEx_pdl_us": 2.5, "calls": eager_calls}
    assert results["information"]["flashinfer_fused"]["8"]["weights"] == 64
    assert results["verify"]["flashinfer_fused"]["1"] == {"graph": "ok", "pdl_chain": "ok"}
    assert "| 8 | routingIndicesBlockKernel | 1 of 64 | 1 |" in results_file.readme_table(results)
    # 9.0 µs per eager call: over 5 µs, and over 2x the graphed launch with metadata (3.5 µs)
    assert "with metadata at most 5 µs: NOT met; within 2x of its graphed launch (the moonshot): NOT met." \
        in results_file.readme_table(results)
    assert results["eager_parts"]["cute"]["8"]["compiled_call_us"] == 1.0
    assert results["eager_parts"]["cute_meta"]["1"] == {**parts, "compiled_call_us": 1.5, "calls": eager_calls}
    table = results_file.readme_table(results)
    plain, meta = table.index("Its parts without metadata"), table.index("Its parts with metadata")
    assert plain < table.index("| 8 | 2.50 | 0.50 | 0.25 | 0.12 | 1.00 |") < meta < \
        table.index("| 8 | 2.50 | 0.50 | 0.25 | 0.12 | 1.50 |")
    assert results["targets"]["cpu_verify_under_10_min"]["met"] is True
    assert results_file.readme_table(results) in capsys.readouterr().out


def _with_peer_information(results):
    kernels = {b: "routingIndicesBlockKernel" if b <= 4 else "routingIndicesDynBlockKernel" for b in (1, 8)}
    results["information"] = {"flashinfer_fused": {
        "1": {"kernel": kernels[1], "weights": 8, "bits_differ": 0, "max_ulp": 0},
        "8": {"kernel": kernels[8], "weights": 64, "bits_differ": 3, "max_ulp": 1}}}
    return results


def test_the_peer_has_a_column_in_both_timing_tables_and_its_weights_a_table_of_their_own():
    times = {n: (lambda i: lambda b: 1.0 + i + b / 100)(i) for i, n in enumerate(VARIANT_NAMES)}
    text = results_file.readme_table(_with_peer_information(synthetic(times)))
    heads = [line for line in text.splitlines() if line.startswith("| b | ")]
    assert heads[0].endswith("| torch | flashinfer_fused |") and heads[1].endswith("| torch | flashinfer_fused |")
    assert heads[2] == "| b | kernel launched | weights whose bits differ | max distance (ulp) |"
    assert "| 1 | routingIndicesBlockKernel | 0 of 8 | 0 |" in text
    assert "| 8 | routingIndicesDynBlockKernel | 3 of 64 | 1 |" in text
    assert "information, not a check" in text


def test_a_file_older_than_the_peer_passes_the_schema_and_renders_without_it():
    results = synthetic(BASE)
    for key in ("variants", "graph", "pdl_chain", "verify"):
        del results[key]["flashinfer_fused"]
    text = results_file.readme_table(results_file.check_schema(results))
    assert "flashinfer_fused" not in text and "information, not a check" not in text
    results = synthetic(BASE)
    del results["graph"]["flashinfer_fused"]["8"]
    with pytest.raises(ValueError, match=r"graph\.flashinfer_fused"):
        results_file.check_schema(results)


def test_weight_differences_count_bits_and_ulps():
    from properties.bench.problem import weight_differences
    want = np.array([[0.5, 1.0, 2.5, 0.0]], np.float32)
    got = want.copy()
    got[0, 1] = np.nextafter(np.float32(1.0), np.float32(2.0))
    got[0, 2] = np.nextafter(np.nextafter(np.float32(2.5), np.float32(0)), np.float32(0))
    assert weight_differences(got, want) == {"weights": 4, "bits_differ": 2, "max_ulp": 2,
                                             "ulp_counts": {"0": 2, "1": 1, "2": 1}}
    got[0, 3] = np.float32(-0.0)
    assert weight_differences(got, want) == {"weights": 4, "bits_differ": 3, "max_ulp": 2,
                                             "ulp_counts": {"0": 2, "1": 1, "2": 1}}
    got[0, 0] = np.nan
    assert weight_differences(got, want)["max_ulp"] is None
    assert weight_differences(want, want) == {"weights": 4, "bits_differ": 0, "max_ulp": 0, "ulp_counts": {"0": 4}}


def test_an_eager_figure_is_the_median_of_its_repeated_means(monkeypatch):
    """eager_us makes one warm-up call, then REPEATS runs of ``calls`` calls; its figure is their median."""
    made = []
    monkeypatch.setattr(timing.torch.cuda, "synchronize", lambda: None)
    entry = timing.eager_us(lambda: made.append(1), 7)
    assert len(made) == 1 + host_clock.REPEATS * 7
    assert len(entry["means_us"]) == host_clock.REPEATS and entry["calls"] == 7
    assert entry["mean_us"] == sorted(entry["means_us"])[host_clock.REPEATS // 2]


def test_time_verify_times_the_gates_recipe_and_writes_its_record(tmp_path, monkeypatch):
    """--time-verify with the two steps replaced: the record carries the gate's verdict, both exit codes, the
    machine it ran on and the commit."""
    calls = []

    def fake_call(step, cwd):
        calls.append(step)
        if "properties.tools.gate" in step:
            reports = Path(step[step.index("--reports") + 1])
            (reports / "verify.json").write_text(json.dumps({"tier": "cpu", "verdict": "PASS", "seconds": 3.0}))
        return 0

    monkeypatch.setattr(harness.subprocess, "call", fake_call)
    monkeypatch.setattr(harness, "cpu_model_rate", lambda seconds: {"b=1": {"cases_per_s": 1.0}})
    out = tmp_path / "record.json"
    assert harness.time_verify(out) == 0
    record = json.loads(out.read_text())
    assert [step[2] for step in calls] == ["oracles.flashinfer_routing", "properties.tools.gate"]
    assert (record["verdict"], record["exit_codes"], record["seconds_pytest"]) == ("PASS", [0, 0], 3.0)
    assert "cores, load average at start" in record["machine"] and record["commit"]


def test_the_eager_verdicts_are_5_us_with_metadata_and_2x_its_graphed_launch_at_every_b():
    results = synthetic(BASE)  # every graphed launch 4.0 µs: the moonshot is 8.0 µs
    for meta_us, verdicts in (((4.5, 5.0), ("met", "met")), ((4.5, 7.9), ("NOT met", "met")),
                              ((4.5, 8.5), ("NOT met", "NOT met"))):
        results["eager"] = {"cute": {"1": {"mean_us": 1.0}, "8": {"mean_us": 1.0}},
                            "cute_meta": {"1": {"mean_us": meta_us[0]}, "8": {"mean_us": meta_us[1]}}}
        assert f"with metadata at most 5 µs: {verdicts[0]}; within 2x of its graphed launch (the moonshot): " \
               f"{verdicts[1]}." in results_file.readme_table(results), meta_us
    results["eager"]["cute_meta"]["8"] = {"error": "RuntimeError: planted"}
    assert "at most 5 µs: NOT met; within 2x of its graphed launch (the moonshot): NOT met." \
        in results_file.readme_table(results)


def test_the_torch_ops_eager_calls_are_columns_beside_routes_where_the_file_has_them():
    results = synthetic(BASE)
    results["eager"] = {name: {"1": {"mean_us": 1.0 + i}, "8": {"mean_us": 2.0 + i}}
                        for i, name in enumerate(("cute", "cute_meta", "cute_op", "cute_meta_op"))}
    table = results_file.readme_table(results)
    assert "The cute_op and cute_meta_op columns: the same calls through the torch op torch.ops.musespark.route." \
        in table
    assert "| b | cute | cute_meta | cute_op | cute_meta_op |\n| --- | --- | --- | --- | --- |\n" \
           "| 1 | 1.00 | 2.00 | 3.00 | 4.00 |\n| 8 | 2.00 | 3.00 | 4.00 | 5.00 |" in table
    del results["eager"]["cute_op"], results["eager"]["cute_meta_op"]
    table = results_file.readme_table(results)
    assert "torch op" not in table and "| b | cute | cute_meta |\n" in table


def test_the_eager_call_of_an_op_variant_is_the_torch_op_on_the_route_variants_arguments():
    """Problem.eager_call: ``NAME_op`` binds torch.ops.musespark.route to the arguments ``NAME`` binds route to
    (engine buffers on the CPU stand in for the GPU's; the op then refuses them as route does)."""
    import torch
    from types import SimpleNamespace

    from kernel import routing
    from properties.bench.problem import Problem, inputs
    from properties.engine import device
    from properties.engine.cases import RoutingCase

    logits, bias = inputs(2)
    case = RoutingCase(logits, bias, np.float32(2.5), True, None, 0, 0, "bench inputs b=2")
    cpu = torch.device("cpu")
    problem = SimpleNamespace(cute=device.buffers(case, cpu),
                              cute_meta=device.buffers(RoutingCase(logits, bias, np.float32(2.5), True, 8, 0, 256,
                                                                   "bench inputs b=2, tile 8"), cpu))
    described = lambda args: [(a.data_ptr(), a.shape) if isinstance(a, torch.Tensor) else a for a in args]  # noqa: E731
    for name in results_file.EAGER_VARIANTS:
        route_call = Problem.eager_call(problem, name)
        op_call = Problem.eager_call(problem, name + results_file.OP_SUFFIX)
        assert route_call.func is routing.route and op_call.func is torch.ops.musespark.route
        assert described(op_call.args) == described(route_call.args) == described(
            device.route_args(getattr(problem, name)))
        with pytest.raises(ValueError, match="^route: logits must be on a CUDA device, got cpu$"):
            op_call()


def test_an_older_files_eager_parts_are_one_table_with_metadata_of_the_parts_it_has():
    results = synthetic(BASE)
    results["eager"] = {"cute_meta": {"1": {"mean_us": 9.0}, "8": {"mean_us": 9.0}}}
    old = {"signature_us": 3.0, "lookup_us": 1.0, "current_device_us": 0.25, "compiled_call_us": 5.5}
    results["eager_parts"] = {"1": old, "8": {"error": "RuntimeError: planted"}}
    lines = results_file.eager_parts_table(results)
    assert lines == ["Its parts with metadata, µs (each timed alone, as many calls the same way):", "",
                     "| b | signature | lookup | current_device() | compiled call alone |",
                     "| --- | --- | --- | --- | --- |", "| 1 | 3.00 | 1.00 | 0.25 | 5.50 |",
                     "| 8 | error | error | error | error |", ""]


@pytest.mark.parametrize("floor,want", [
    (None, None),
    ({"cuLaunchKernel_us": 5.5, "cuLaunchKernelEx_pdl_us": 4.54, "calls": 2000},
     "(an empty kernel through ctypes into the driver, 2000 calls back to back): cuLaunchKernel 5.50 µs, "
     "cuLaunchKernelEx with the PDL attribute 4.54 µs per call."),
    ({"error": "RuntimeError: planted"}, "not measured, RuntimeError: planted"),
], ids=["an older file", "measured", "an error"])
def test_the_eager_table_ends_with_the_launch_floor_a_file_has(floor, want):
    results = synthetic(BASE)
    results["eager"] = {"cute_meta": {"1": {"mean_us": 9.0}, "8": {"mean_us": 9.0}}}
    if floor is not None:
        results["launch_floor"] = floor
    table = results_file.readme_table(results)
    assert (want in table) if want else "The floor of a launch" not in table


def test_the_launch_floors_structures_have_cuda_hs_layout():
    """CUlaunchAttribute: a 4-byte id padded to 8, then a 64-byte value union; CUlaunchConfig: seven 32-bit
    dimensions and the shared bytes, the stream and attribute pointers (8-byte aligned) and the attribute count."""
    import ctypes

    from properties.bench import floor

    assert ctypes.sizeof(floor.LaunchAttribute) == 72 and floor.LaunchAttribute.value.offset == 8
    assert ctypes.sizeof(floor.LaunchConfig) == 56
    config = floor.LaunchConfig
    assert (config.stream.offset, config.attributes.offset, config.attribute_count.offset) == (32, 40, 48)
