"""The soak engine on the GPU: the compiled model, alone and replayed from a CUDA graph, equals the model as
written, bit for bit, on every family (b = 1 and 8, both renormalize, with and without metadata); the graphed
draw equals make_batch's; the pipelined engine runs the CuTe kernel, the Triton oracle and FlashInfer's
metadata in graph branches against it with no disagreement and counts every row it enqueued; a planted fault
is caught in the first batch and saved."""

import pytest
import torch

from kernel import routing
from properties.soak import dist
from properties.soak.loop import Config, run
from properties.soak.graphed import Draws
from properties.soak.impls import FIELDS, Model, run_model
from properties.soak.plan import Space, make_batch, make_plan

pytestmark = pytest.mark.gpu
GPU = torch.device("cuda", 0)


@pytest.fixture(scope="module", params=["compiled", "compiled, graphed"])
def fast(request):
    return Model(compiled=True, graphed="graphed" in request.param)


def _bits(x):
    return x.view(torch.int32) if x.dtype == torch.float32 else x


@pytest.mark.parametrize("b", [1, 8])
@pytest.mark.parametrize("metadata", ["on", "off"])
def test_the_compiled_model_equals_the_model_on_every_family(fast, b, metadata):
    space = Space(b=(b,), metadata=metadata, problems=4096)
    for index in range(3):
        plan = make_plan(space, 11, index // 2)  # a plan's first batch and a replay of its graph
        assert len(plan.runs) == len(space.families) and len(set(plan.renormalize.tolist())) == 2
        batch = make_batch(plan, index, GPU)
        got, want = fast.run(batch), run_model(batch)
        assert fast.describe() == ("compiled, graphed" if fast.replays else "compiled")  # not as written
        for field in FIELDS:
            if getattr(want, field) is None:
                assert getattr(got, field) is None
                continue
            differ = _bits(getattr(got, field)) != _bits(getattr(want, field))
            assert not bool(differ.any()), f"{field}: {int(differ.sum())} elements differ (plan {index})"


@pytest.mark.parametrize("b", [1, 8])
def test_the_graphed_draw_equals_make_batch_on_every_family(b):
    draws, space = Draws(GPU), Space(b=(b,), problems=4096)
    for index in range(3):
        plan = make_plan(space, 13, index // 2)
        got, want = draws.batch(plan, index), make_batch(plan, index, GPU)
        assert draws.describe() == "graphed"
        for name in ("logits", "bias"):
            differ = _bits(getattr(got, name)) != _bits(getattr(want, name))
            assert not bool(differ.any()), f"{name}: {int(differ.sum())} elements differ (batch {index})"


def _ctx():
    return dist.Context(0, 1, GPU, None)


def test_the_pipelined_soak_agrees_in_graph_branches_and_counts_every_row(tmp_path):
    for renormalize in (False, True):
        routing.prepare(renormalize)
    space = Space(b=(1, 8), problems=4096, plan_batches=3)  # the row counts of the test above: compiled once
    summary = run(Config(seed=5, rows=4096 * 8 * 7, space=space, implementations=("cute", "triton", "flashinfer"),
                         failures_dir=tmp_path, progress=False, depth=3), _ctx())
    this = summary["this_run"]
    assert summary["model_mismatches"] == [] and sum(this["tally"]["disagreements"].values()) == 0
    assert this["tally"]["batches"] == summary["next_offset"] and this["rows"] >= 4096 * 8 * 7
    assert this["model"] == "compiled, graphed" and this["draw"] == "graphed" and this["depth"] == 3
    assert this["branches"]["cute"] > 1 and this["branches"]["triton"] > 1, summary["eager"]
    assert summary["tally"]["crosscheck_rows"] > 0


def test_both_planted_faults_are_caught_in_the_first_batch(tmp_path):
    space = Space(b=(2,), metadata="on", problems=256)
    summary = run(Config(seed=1, rows=1, space=space, faults=("ties_to_highest_index", "writes_the_guard"),
                         failures_dir=tmp_path, progress=False), _ctx())
    assert summary["this_run"]["tally"]["batches"] == 1
    for fault in ("fault-ties_to_highest_index", "fault-writes_the_guard"):
        assert summary["tally"]["disagreements"][fault] > 0
        assert any(fault in path for path in summary["case_files"])
