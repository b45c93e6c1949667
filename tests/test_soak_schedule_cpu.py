"""The soak's scheduling on the CPU (properties/soak/schedule.py, launches.py): batches that finish out of
order are retired in order with the counts, offsets and case files of a run with one batch at a time; each
batch in flight keeps its own outputs while later ones run; each stage waits for its own batch's inputs;
the graph's problems split into branches; the host-only count of an agreeing batch equals the device's; the
one-sort permutation ranks equal the two-sort ones."""

import numpy as np
import pytest
import torch

from properties.soak import bulk, dist, graphed, verdict
from properties.soak.loop import Config, implementations, run
from properties.soak.impls import Model, run_model
from properties.engine.interface import Declaration, Implementation
from properties.soak.launches import Launched, branch_count, split
from properties.soak.plan import Plans, Space, make_batch, make_plan
from properties.soak.summary import Tally
from properties.soak.compare import ModelMismatch
from properties.soak.schedule import Flight, Pipeline, Streams, check_as_written

CPU = dist.Context(0, 1, torch.device("cpu"), None)
SPACE = Space(b=(2, 3), problems=24, plan_batches=2)


class _Event:
    def __init__(self, log, stage, batch):
        self.log, self.stage, self.batch, self.done = log, stage, batch, False


class OutOfOrderStreams(Streams):
    """The CPU's streams, with events that finish late and out of order: waiting on one first finishes every
    later event, newest first (later batches finishing before earlier ones), then it. Logs every wait."""

    def __init__(self, device):
        super().__init__(device)
        self.events, self.log, self.finished, self.batch = [], [], [], None

    def record(self, stage):
        event = _Event(self.log, stage, self.batch)
        self.events.append(event)
        return event

    def wait(self, stage, event):
        self.log.append(("wait", stage, event.stage, event.batch))

    def synchronize(self, event):
        for later in reversed(self.events[self.events.index(event):]):
            if not later.done:
                later.done = True
                self.finished.append(later.batch)
        self.log.append(("synchronize", event.stage, event.batch))


class _Tracking(Pipeline):
    """A Pipeline telling its streams which batch is being enqueued (for the log)."""

    def enqueue(self, index):
        self.streams.batch = index
        return super().enqueue(index)


def _run(tmp_path, depth, streams=None, **kw):
    config = Config(seed=3, rows=9 * 24 * 3, space=SPACE, faults=("ties_to_highest_index",), depth=depth,
                    failures_dir=tmp_path / f"failures-{depth}", progress=False, **kw)
    if streams is None:
        return run(config, CPU)
    import properties.soak.loop as loop
    original = loop.Pipeline
    loop.Pipeline = lambda device, model, impls, plans, depth, draws: _Tracking(device, model, impls, plans, depth,
                                                                                  streams, draws)
    try:
        return run(config, CPU)
    finally:
        loop.Pipeline = original


def _names(summary):
    return sorted(path.split("/")[-1].split("-", 1)[1] for path in summary["case_files"])


def test_batches_that_finish_out_of_order_are_retired_in_order_with_the_serial_counts(tmp_path):
    streams = OutOfOrderStreams(torch.device("cpu"))
    serial, overlapped = _run(tmp_path, 1), _run(tmp_path, 4, streams)
    assert streams.finished != sorted(streams.finished), "the stand-in finished later batches first"
    retired = [entry[2] for entry in streams.log if entry[0] == "synchronize"]
    assert retired == sorted(retired) == list(range(overlapped["next_offset"]))
    assert overlapped["tally"] == serial["tally"] and overlapped["next_offset"] == serial["next_offset"]
    assert _names(overlapped) == _names(serial) and serial["case_files"]
    assert overlapped["this_run"]["depth"] == 4 and serial["this_run"]["depth"] == 1


def test_each_stage_waits_for_its_own_batch(tmp_path):
    streams = OutOfOrderStreams(torch.device("cpu"))
    _run(tmp_path, 3, streams)
    waits = [entry for entry in streams.log if entry[0] == "wait"]
    assert waits
    for _, stage, after, batch_of_event in waits:
        assert (stage, after) in {("model", "draw"), ("implementations", "draw"), ("implementations", "model")}
    enqueued = {}
    for entry in streams.log:
        if entry[0] == "wait":
            enqueued.setdefault(entry[3], []).append(entry[1:3])
    for batch, stages in enqueued.items():
        assert ("model", "draw") in stages and ("implementations", "model") in stages, batch


def test_resumed_runs_with_batches_in_flight_end_where_one_run_ends(tmp_path):
    space = Space(b=(4,), problems=16, plan_batches=3)
    rows = 16 * 4
    whole = run(Config(rows=8 * rows, space=space, depth=3, failures_dir=tmp_path, progress=False,
                       faults=("writes_the_guard",)), CPU)
    first = run(Config(rows=3 * rows, space=space, depth=3, failures_dir=tmp_path, progress=False,
                       faults=("writes_the_guard",)), CPU)
    rest = run(Config(seed=first["seed"], offset=first["next_offset"], rows=8 * rows, space=space, depth=2,
                      failures_dir=tmp_path, progress=False, faults=("writes_the_guard",), previous=first), CPU)
    assert first["next_offset"] == 3 and first["tally"]["batches"] == 3, "no batch enqueued past --rows"
    assert rest["next_offset"] == whole["next_offset"] == 8 and rest["tally"] == whole["tally"]


def test_a_batch_in_flight_keeps_its_own_outputs_while_later_batches_run():
    config = Config(space=SPACE, faults=("ties_to_highest_index",))
    impls = implementations(config)
    pipeline = Pipeline(torch.device("cpu"), Model(), impls, Plans(SPACE, 5), depth=3)
    flights = [pipeline.enqueue(index) for index in range(3)]
    for flight in flights:
        alone = impls[0].enqueue(make_batch(flight.batch.plan, flight.index, "cpu"), run_model(flight.batch))
        for field in ("ids", "weights"):
            assert torch.equal(getattr(flight.outputs[impls[0].name], field).view(torch.int32),
                               getattr(alone, field).view(torch.int32)), (flight.index, field)
    assert [pipeline.retire().index for _ in range(3)] == [0, 1, 2]


def test_the_problems_split_into_branches_of_nearly_equal_runs():
    problems = np.arange(3, 103)
    for branches in (1, 3, 33, 100):
        runs = split(problems, branches)
        assert len(runs) == branches and np.array_equal(np.concatenate(runs), problems)
        assert max(map(len, runs)) - min(map(len, runs)) <= 1
    assert branch_count(torch.device("cpu"), 1000) == 1


def test_an_agreeing_batch_counts_the_same_from_the_host_as_on_the_device():
    plan = make_plan(Space(b=(3,), metadata="on", problems=40), 2, 0)
    batch = make_batch(plan, 0, "cpu")
    want = run_model(batch)
    called = np.array([p for p in range(plan.problems) if p % 5])
    mask = torch.zeros(plan.problems, dtype=torch.bool)
    mask[torch.from_numpy(called)] = True
    got = type(want)(want.ids.clone(), want.weights.clone(), want.metadata.clone(), mask)
    device, host = Tally(), Tally()
    verdict.count(device, "x", plan, got, want)
    verdict.count_agreeing(host, "x", plan, ("ids", "weights", "metadata"), called)
    assert host.to_json() == device.to_json() and sum(host.weight_ulps.values()) == len(called) * 3 * 8


@pytest.mark.parametrize("shape", [(7, 256), (3, 4, 32)])
def test_one_sort_ranks_equal_two_sorts_ties_included(shape):
    keys = torch.randint(0, 4, shape, generator=torch.Generator().manual_seed(1)).float()
    order = keys.argsort(-1)
    assert torch.equal(bulk.inverse_permutation(order), order.argsort(-1))


def test_a_compiled_model_that_differs_in_one_bit_stops_the_soak():
    plan = make_plan(Space(b=(2,), metadata="on", problems=20), 4, 0)
    batch = make_batch(plan, 0, "cpu")
    want = run_model(batch)
    flight = Flight(0, batch, {"model": want}, eager_wants={"model": run_model(batch)})
    check_as_written(flight)  # equal: nothing raised
    flipped = want.weights.clone()
    flipped.view(torch.int32)[3, 1, 5] ^= 1
    flight.wants["model"] = type(want)(want.ids, flipped, want.metadata)
    with pytest.raises(ModelMismatch, match="1 weights element"):
        check_as_written(flight)


def test_a_metadata_only_implementation_is_not_called_in_a_plan_without_metadata():
    """A plan of "mixed" metadata may ask for none; FlashInfer's metadata oracle was then called with no tile
    on the H200 (tile_n 0 refused), where it must not be called at all."""
    calls = []

    def metadata_only(logits, bias, ids, weights, scale, renormalize=True, metadata=None, local_expert_offset=0,
                      num_local_experts=0, tile_n=0):
        calls.append(tile_n)
        metadata.fill_(0)

    impl = Launched(Implementation("metadata_only", metadata_only,
                                   Declaration(writes=("metadata",), reads_ids=True, device="cpu")))
    for metadata, called in (("off", 0), ("on", 24)):
        plan = make_plan(Space(b=(2,), problems=24, metadata=metadata), 3, 0)
        batch = make_batch(plan, 0, "cpu")
        got = impl.enqueue(batch, run_model(batch))
        assert len(calls) == called and impl.last_called.size == called
        assert (got.metadata is None) == (metadata == "off")
        calls.clear()


def test_a_graphed_draw_that_differs_in_one_bit_stops_the_soak():
    plan = make_plan(Space(b=(2,), problems=20), 4, 0)
    batch, eager = make_batch(plan, 0, "cpu"), make_batch(plan, 0, "cpu")
    flight = Flight(0, batch, {"model": run_model(batch)}, eager_batch=eager)
    check_as_written(flight)  # equal: nothing raised
    batch.bias.view(torch.int32)[7, 200] ^= 1 << 31
    with pytest.raises(ModelMismatch, match="draw as run differs from the draw as written in 1 bias element"):
        check_as_written(flight)


class _Cycle:
    def __init__(self):
        self.me = self


def test_a_capture_runs_after_the_cyclic_garbage_is_freed_and_with_the_collector_held_off(monkeypatch):
    """A CUDA graph freed by the collector in the middle of a capture breaks the capture; a stand-in for
    torch.cuda.graph records the collector's state inside."""
    import contextlib
    import gc
    import weakref

    seen = []

    @contextlib.contextmanager
    def graph(g):
        seen.append((gc.isenabled(), garbage() is None))
        yield

    monkeypatch.setattr(torch.cuda, "graph", graph)
    garbage = weakref.ref(_Cycle())
    assert garbage() is not None  # only the cyclic collector frees it
    with graphed.capturing(object()):
        pass
    assert seen == [(False, True)] and gc.isenabled()


def test_a_graphed_model_is_freed_without_the_cyclic_collector():
    import gc
    import weakref

    gc.disable()
    try:
        model = Model(graphed=True)
        alive, replays = weakref.ref(model), weakref.ref(model.replays)
        del model
        assert alive() is None and replays() is None
    finally:
        gc.enable()
