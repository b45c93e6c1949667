"""The soak engine's logic on the CPU (properties/soak), with the model with a planted fault standing in for
the GPU implementations: each bulk family makes its edge case, batches are deterministic per (seed, index),
the device comparison finds every flipped bit, the model on torch agrees with the NumPy model, a planted fault
is caught within 10^6 rows and its case file replays, runs resume and shard over two gloo ranks to the same
counts, and the summary adds up."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from oracles.numpy_model import add_rn, sigmoid_f32
from properties.soak import bulk, dist
from properties.soak.__main__ import main
from properties.soak.compare import ModelMismatch, cross_check, disagreeing_problems
from properties.soak.loop import Config, run
from properties.soak.impls import BatchOutputs, run_model
from properties.soak.plan import Space, make_batch, make_plan, metadata_stride
from kernel.layout import metadata_size
from properties.inputs.strategies import DIV_FULL_SCALING_REACH, EX2_OVERFLOW_EDGE, GENERATORS, SATURATED_SCORE_EDGE

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CPU = dist.Context(0, 1, torch.device("cpu"), None)
DETECTION_LIMIT_ROWS = 10**6
SMALL = dict(problems=24, plan_batches=2)
_SIGN = 0x80000000


def _draw(family, n=24, b=4, seed=7):
    logits, bias = bulk.generate(family, torch.Generator().manual_seed(seed), n, b, "cpu")
    return logits.numpy(), bias.numpy()


def _choice(logits, bias):
    """c = s + bias per row [n, b, 256], and the model's ids [n, b, 8]."""
    c = add_rn(sigmoid_f32(logits), np.broadcast_to(bias[:, None, :], logits.shape).copy())
    batch = dataclass_batch(logits, bias)
    return c, run_model(batch).ids.numpy()


def dataclass_batch(logits, bias):
    space = Space(b=(logits.shape[1],), metadata="off", families=("plain",), problems=logits.shape[0])
    plan = make_plan(space, 0, 0)
    batch = make_batch(plan, 0, "cpu")
    return type(batch)(plan, 0, torch.from_numpy(logits), torch.from_numpy(bias), batch.scale, batch.renormalize,
                       batch.offset, batch.count)


def _picked(c, ids):
    return np.take_along_axis(c, ids.astype(np.intp), axis=-1)


def _tie_in_top8(c, ids, same_lane):
    """Per row: a pick whose c another expert shares, in the pick's lane (or in another lane)."""
    experts = np.arange(256)
    equal = (_picked(c, ids)[..., :, None] == c[..., None, :]) & (ids[..., :, None] != experts)
    lanes = (ids[..., :, None] // 8) == experts // 8
    return (equal & (lanes if same_lane else ~lanes)).any(axis=(-1, -2))


def _bits(x):
    return x.view(np.uint32)


# family -> mask [n, b] of the rows of a bulk batch (logits, bias, c, model ids) that have its edge case.
ROWS_WITH_EDGE_CASE = {
    "tie_within_lane": lambda lg, bs, c, ids: _tie_in_top8(c, ids, True),
    "tie_across_lanes": lambda lg, bs, c, ids: _tie_in_top8(c, ids, False),
    "tie_at_eighth_place": lambda lg, bs, c, ids: (c == _picked(c, ids)[..., 7:8]).sum(-1) >= 2,
    "all_equal": lambda lg, bs, c, ids: (_bits(lg) == _bits(lg)[..., :1]).all(-1) & (_bits(bs) == _bits(bs)[:, :1]).all(-1)[:, None],
    "rounding_tie": lambda lg, bs, c, ids: ((_picked(c, ids)[..., :, None] == _picked(c, ids)[..., None, :])
                                           & (_picked(lg, ids)[..., :, None] != _picked(lg, ids)[..., None, :])).any((-1, -2)),
    "subnormal_values": lambda lg, bs, c, ids: ((_bits(lg) & 0x7F800000) == 0).any(-1) & (lg != 0).any(-1),
    "signed_zeros": lambda lg, bs, c, ids: (_bits(lg) == 0).any(-1) & (_bits(lg) == _SIGN).any(-1)
                                           & ((_bits(bs) == 0).any(-1) & (_bits(bs) == _SIGN).any(-1))[:, None],
    "minus_inf_bias": lambda lg, bs, c, ids: np.isneginf(bs).any(-1)[:, None] & np.ones(lg.shape[:2], bool),
    "infinite_logits": lambda lg, bs, c, ids: np.isinf(lg).any(-1),
    "div_full_scaling": lambda lg, bs, c, ids: ((lg >= DIV_FULL_SCALING_REACH[0]) & (lg <= DIV_FULL_SCALING_REACH[1])).sum(-1) >= 128,
    "ex2_overflow": lambda lg, bs, c, ids: (lg <= EX2_OVERFLOW_EDGE).sum(-1) >= 128,
    "saturated_score": lambda lg, bs, c, ids: (lg >= SATURATED_SCORE_EDGE).any(-1),
    "bias_dominates": lambda lg, bs, c, ids: (np.abs(bs) >= 2).all(-1)[:, None] & np.ones(lg.shape[:2], bool),
    "random_bits": lambda lg, bs, c, ids: (np.abs(lg) > 1e10).any(-1) & (lg < 0).any(-1),
    "testfloat_patterns": lambda lg, bs, c, ids: (np.abs(lg) == 2.0**-126).any(-1) | (np.isinf(lg).any(-1)) | (lg == 0).any(-1)
                                                 | ((_bits(lg) & 0x7FFFFF) == 0x7FFFFF).any(-1),
    "weight_overflow": lambda lg, bs, c, ids: (lg <= EX2_OVERFLOW_EDGE).any(-1) & ((lg >= -80) & (lg <= -20)).any(-1),
    "shared_experts": lambda lg, bs, c, ids: (np.sort(ids, -1) == np.sort(ids, -1)[:, :1]).all((-1, -2))[:, None]
                                             & np.ones(lg.shape[:2], bool),
}


def test_the_bulk_families_are_the_catalog():
    assert bulk.FAMILIES == (bulk.PLAIN, *GENERATORS) and bulk.NOT_IN_BULK == ()
    assert sorted(ROWS_WITH_EDGE_CASE) == sorted(GENERATORS)


@pytest.mark.parametrize("family", sorted(GENERATORS))
def test_each_family_makes_its_edge_case(family):
    logits, bias = _draw(family)
    assert not np.isnan(logits).any() and not np.isnan(bias).any()
    c, ids = _choice(logits, bias)
    made = ROWS_WITH_EDGE_CASE[family](logits, bias, c, ids)
    assert made.mean() >= 0.9, f"{family}: only {made.mean():.0%} of rows have the edge case"


def test_plain_rows_are_router_like():
    logits, bias = _draw(bulk.PLAIN)
    assert np.isfinite(logits).all() and np.abs(logits).max() < 30 and np.abs(bias).max() < 1


def test_batches_are_a_function_of_seed_and_index():
    space = Space(**SMALL)
    a, b = make_plan(space, 3, 1), make_plan(space, 3, 1)
    assert a.runs == b.runs and (a.scale.view(np.uint32) == b.scale.view(np.uint32)).all()
    x, y, z = make_batch(a, 2, "cpu"), make_batch(b, 2, "cpu"), make_batch(a, 3, "cpu")
    assert torch.equal(x.logits.view(torch.int32), y.logits.view(torch.int32))
    assert torch.equal(x.bias.view(torch.int32), y.bias.view(torch.int32))
    assert not torch.equal(x.logits.view(torch.int32), z.logits.view(torch.int32))
    assert make_plan(space, 4, 1).scale.tobytes() != a.scale.tobytes()


def test_plans_cover_their_space():
    space = Space(problems=64, plan_batches=1)
    plans = [make_plan(space, 0, k) for k in range(60)]
    assert {p.b for p in plans} == set(range(1, 9))
    assert None in {p.tile_n for p in plans} and len({p.tile_n for p in plans}) > 10
    for plan in plans:
        assert sum(end - start for _, start, end in plan.runs) == plan.problems
        assert ((plan.offset >= 0) & (plan.count >= 0) & (plan.offset + plan.count <= 256)).all()
        for family, start, end in plan.runs:
            if family == bulk.WEIGHT_OVERFLOW:
                assert (plan.scale[start:end] >= np.float32(1e37)).all() and plan.renormalize[start:end].all()
    assert {family for plan in plans for family, _, _ in plan.runs} == set(bulk.FAMILIES)
    with pytest.raises(ValueError, match="^b must be"):
        Space(b=(9,))


@pytest.mark.parametrize("field", ["ids", "weights", "metadata", "padding"])
def test_the_device_comparison_finds_one_flipped_bit(field):
    plan = make_plan(Space(problems=20, metadata="on", tiles=(3,)), 1, 0)
    batch = make_batch(plan, 0, "cpu")
    want = run_model(batch)
    got = {name: getattr(want, name).clone() for name in ("ids", "weights", "metadata")}
    assert disagreeing_problems(BatchOutputs(**got), want) == []
    if field == "padding":  # past metadata_size(3), inside the stride
        got["metadata"][13, metadata_stride(3) - 1] ^= 1
    else:
        got[field].view(torch.int32).view(20, -1)[13, 5] ^= 1 << 31
    assert disagreeing_problems(BatchOutputs(**got), want) == [13]


def test_the_model_on_torch_agrees_with_the_numpy_model_and_a_difference_is_loud():
    plan = make_plan(Space(problems=36, metadata="on"), 2, 0)
    batch = make_batch(plan, 0, "cpu")
    want = run_model(batch)
    assert cross_check(batch, want, range(plan.problems)) == plan.rows
    weights = want.weights.clone()
    weights.view(torch.int32)[7, 0, 0] ^= 1
    with pytest.raises(ModelMismatch, match="problem 7"):
        cross_check(batch, BatchOutputs(want.ids, weights, want.metadata), [7])


def _config(tmp_path, **kw):
    kw.setdefault("space", Space(**SMALL))
    return Config(failures_dir=tmp_path / "failures", progress=False, **kw)


def test_a_planted_fault_is_caught_within_a_million_rows_and_its_case_file_replays(tmp_path, replay_process):
    summary = run(_config(tmp_path, rows=DETECTION_LIMIT_ROWS, faults=("ties_to_highest_index",),
                          stop_on_failure=True, space=Space(problems=256)), CPU)
    assert summary["this_run"]["rows"] <= DETECTION_LIMIT_ROWS
    assert summary["tally"]["disagreements"]["fault-ties_to_highest_index"] > 0
    saved = [p for p in summary["case_files"]]
    assert saved
    case = json.loads(open(saved[0]).read())
    assert len(case["inputs"]["logits"]) == 1, "minimised to the one row that disagrees alone"
    replay = replay_process(saved[0], planted=False, timeout=300)
    assert replay.returncode == 1 and "REPRODUCED" in replay.stdout, replay.stdout + replay.stderr


@pytest.mark.long
def test_a_metadata_fault_is_caught_and_saved_whole_and_its_case_file_replays(tmp_path, replay_process):
    summary = run(_config(tmp_path, rows=1, faults=("writes_the_guard",),
                          space=Space(problems=64, metadata="on", b=(3,))), CPU)
    assert summary["tally"]["disagreements"]["fault-writes_the_guard"] > 0
    case = json.loads(open(summary["case_files"][0]).read())
    assert case["disagreements"][0]["field"] == "metadata"
    replay = replay_process(summary["case_files"][0], planted=False, timeout=300)
    assert replay.returncode == 1 and "REPRODUCED" in replay.stdout, replay.stdout + replay.stderr


def test_a_resumed_run_counts_what_one_run_counts(tmp_path):
    space = Space(b=(4,), problems=16, plan_batches=3)
    rows_per_batch = 64
    whole = run(_config(tmp_path, rows=8 * rows_per_batch, space=space), CPU)
    first = run(_config(tmp_path, rows=3 * rows_per_batch, space=space), CPU)
    rest = run(_config(tmp_path, seed=first["seed"], offset=first["next_offset"], rows=8 * rows_per_batch,
                       space=space, previous=first), CPU)
    assert first["next_offset"] == 3 and rest["next_offset"] == whole["next_offset"] == 8
    assert rest["tally"] == whole["tally"] and rest["done"] and len(rest["chunks"]) == 2


def test_the_summary_adds_up(tmp_path):
    summary = run(_config(tmp_path, rows=200), CPU)
    tally = summary["tally"]
    assert sum(tally["rows_by_family"].values()) == sum(tally["rows_by_variant"].values()) == tally["rows"] >= 200
    assert sum(tally["rows_by_tile"].values()) == tally["rows"] and tally["crosscheck_rows"] > 0
    env = summary["provenance"]
    assert env["commit"] and env["packages"]["torch"] and env["devices"][0]["device"] == "cpu"
    assert summary["next_offset"] == tally["batches"] and summary["done"]


def _torchrun(tmp_path, ranks, *args):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
               "-m", "properties.soak", "--device", "cpu", "--backend", "gloo", "--no-progress",
               "--problems", "16", "--plan-batches", "2", "--failures-dir", str(tmp_path / "failures"), *args]
    env = dist.worker_env({**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1"})
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env, timeout=300)


def test_two_gloo_ranks_share_the_work_and_gather_counts_and_failures(tmp_path):
    rows = 16 * 4 * 4  # four batches of b = 4
    out = _torchrun(tmp_path, 2, "--b", "4", "--rows", str(rows), "--out", str(tmp_path / "two.json"),
                    "--fault", "ties_to_highest_index", "--crosscheck", "1")
    assert out.returncode == 1, out.stdout + out.stderr  # the fault disagrees
    two = json.loads((tmp_path / "two.json").read_text())
    one = run(_config(tmp_path, rows=rows, faults=("ties_to_highest_index",), crosscheck=1,
                      space=Space(b=(4,), problems=16, plan_batches=2), max_case_files=0), CPU)
    assert two["this_run"]["world_size"] == 2 and two["this_run"]["backend"] == "gloo"
    assert len(two["this_run"]["devices"]) == 2 and two["next_offset"] == one["next_offset"] == 4
    assert two["tally"] == one["tally"]
    ranks = {json.loads(open(p).read())["origin"]["soak"]["rank"] for p in two["case_files"]}
    assert ranks == {0, 1}, "rank 0 writes the failures of both ranks"


@pytest.mark.parametrize("args, message", [
    ([], "give --rows, --seconds or both"),
    (["--rows", "10", "--impl", "cute"], "needs a CUDA device"),
    (["--rows", "10", "--b", "9"], "argument --b: must be an integer in 1..8"),
    (["--rows", "1.5"], "argument --rows: must be a whole number"),
    (["--rows", "10"], "--impl: no implementation under test on cpu"),
    (["--rows", "10", "--impl", "model", "--crosscheck", "0"], "--crosscheck 0 with --impl model"),
    (["--rows", "10", "--impl", "bad=no_such_module_here:route"], "implementation bad not run"),
])
def test_bad_arguments_exit_2_naming_them(args, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main(["--device", "cpu", "--no-progress", "--out", str(tmp_path / "s.json"), *args])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "s.json").exists()


def test_the_worker_environment_keeps_multicast_off():
    env = dist.worker_env({"NCCL_NVLS_ENABLE": "1"})
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert env["NVSHMEM_DISABLE_NVLS"] == "1"


def test_the_same_resume_command_starts_continues_and_stops_when_done(tmp_path, capsys):
    summary = tmp_path / "chunks.json"
    args = ["--device", "cpu", "--no-progress", "--impl", "model", "--b", "2", "--problems", "8",
            "--failures-dir", str(tmp_path), "--resume", str(summary), "--rows", "48"]
    assert main(args + ["--seconds", "0"]) == 0  # one batch per chunk
    first = json.loads(summary.read_text())
    assert first["next_offset"] == 1 and not first["done"]
    for _ in range(2):  # three batches of 16 rows, one per run: at most two more runs
        if json.loads(summary.read_text())["done"]:
            break
        assert main(args + ["--seconds", "0"]) == 0
    done = json.loads(summary.read_text())
    assert done["done"], "not done after the two runs its 48 rows need"
    assert done["next_offset"] == 3 and len(done["chunks"]) == 3 and done["tally"]["rows"] == 48
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == ("soak: PASS: 24 rows of the model on the device equal to the NumPy model's, of 48 "
                                    "drawn (model only) (exit 0)")  # the whole run's, every chunk's rows
    assert main(args) == 0 and "done, 48 rows of 48" in capsys.readouterr().out


H200_FAULT_CASE = "corpora/examples/soak-fault-ties-to-highest-index.json"


@pytest.mark.long
def test_the_h200_soaks_planted_fault_case_reproduces_on_the_cpu(replay_process):
    """Written by `python -m properties.soak --fault ties_to_highest_index` on the H200: replayed here, the recorded
    fault differs from the live model (exit 1) and the recorded model output agrees with it."""
    replay = replay_process(H200_FAULT_CASE, planted=False, timeout=120)
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "fault-ties_to_highest_index (recorded) ids vs model" in replay.stdout
    assert "model (recorded)" not in replay.stdout
    assert replay.stdout.splitlines()[-1] == "replay: DIFFER (exit 1)"


H200_PIPELINED_FAULT_CASE = "corpora/examples/soak-fault-ties-to-highest-index-pipelined.json"


@pytest.mark.long
def test_the_pipelined_h200_soaks_first_batch_fault_case_reproduces_on_the_cpu(replay_process):
    """Written in the first batch of the pipelined soak on the H200 (batches in flight, graph branches;
    properties/results/soak-h200-planted-faults-22a1690.json): the recorded fault differs from the live model."""
    replay = replay_process(H200_PIPELINED_FAULT_CASE, planted=False, timeout=120)
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "fault-ties_to_highest_index (recorded) ids vs model" in replay.stdout
    assert replay.stdout.splitlines()[-1] == "replay: DIFFER (exit 1)"


def test_the_bench_summary_carries_its_provenance_and_a_disagreement_fails_it(tmp_path, capsys):
    out = tmp_path / "bench.json"
    rc = main(["--bench", "--device", "cpu", "--fault", "ties_to_highest_index", "--b", "1",
               "--problems", "16", "--bench-batches", "1", "--no-progress", "--out", str(out)])
    summary = json.loads(out.read_text())
    assert rc == 1 and summary["bench"] and sum(r["disagreements"] for r in summary["bench"]) > 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("soak bench: FAIL")
    assert {"commit", "date", "packages", "devices"} <= set(summary["provenance"])


def test_the_flashinfer_adapter_lays_its_outputs_where_the_oracle_puts_them(monkeypatch):
    """The registry's "flashinfer" (properties/engine/builtins.py) hands FlashInfer the ids it is given and the
    local range, and FlashInfer's outputs land in the metadata layout exactly where the oracle's to_meta lays
    them, every other element keeping the poison; a CPU stand-in for the launch writes its buffers."""
    from oracles.flashinfer_routing import DynBlockMetadata, enqueue, to_meta
    from properties.engine.builtins import route_flashinfer
    from properties.engine.poison import METADATA_POISON

    tile, rng, launched = 3, np.random.default_rng(7), []

    def fake_enqueue(buffers, offset, count):
        written = [rng.integers(-1, 500, out.numel(), dtype=np.int32) for out in buffers.outputs()]
        for out, values in zip(buffers.outputs(), written):
            out.copy_(torch.from_numpy(values))
        launched.append((buffers, offset, count, written))

    monkeypatch.setattr(enqueue, "enqueue", fake_enqueue)
    monkeypatch.setattr(enqueue, "_check_ids_tensor", lambda ids: None)  # the stand-in's ids are on the CPU
    ids = torch.zeros((2, 8), dtype=torch.int32)
    metadata = torch.full((metadata_size(tile) + 4,), METADATA_POISON, dtype=torch.int32)
    route_flashinfer(None, None, ids, None, 1.0, True, metadata[:metadata_size(tile)], 5, 7, tile)
    (buffers, offset, count, (e2p, batch, limit, p2t, scalars)), = launched
    assert buffers.ids is ids and (offset, count, buffers.tile_n) == (5, 7, tile)
    want = to_meta(DynBlockMetadata(batch, limit, p2t, e2p, int(scalars[0]), int(scalars[1]), tile, METADATA_POISON))
    assert np.array_equal(metadata[:want.size].numpy(), want)
    assert (metadata[want.size:] == METADATA_POISON).all()


def test_the_results_readmes_soak_table_is_made_from_the_committed_bench_records():
    from properties.soak import table

    assert table.BLOCK.read(table.README.read_text()) == table.table(), \
        "stale: python -m properties.soak.table --update-readme"
