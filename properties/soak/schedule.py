"""Batches in flight. Each batch's stages go onto streams of their own: the draw, the model, the
implementations (then the comparison, which waits for the model), with events between them; a batch is
retired (its comparison read, counted, its disagreements saved, a sample cross-checked on the CPU) in batch
order once its last event has happened, while up to ``depth - 1`` later batches are already on the device.
Each implementation is compared with its own reference (properties/engine/references.py): the pipeline's
model first, and every other reference an implementation declares in the same forms beside it.
Each batch holds its own inputs and outputs until it is retired, so nothing a later batch writes can reach
it, whichever finishes first. On a CPU there are no streams: every stage runs when it is enqueued.
"""

import contextlib
from collections import deque
from dataclasses import dataclass, field

import torch

from properties.engine.compare import REFERENCE
from properties.soak.compare import ModelMismatch, bits, cross_check, differing, sample
from properties.soak.graphed import Draws
from properties.soak.impls import FIELDS, run_model
from properties.soak.plan import make_batch

STAGES = ("draw", "model", "implementations")


class Streams:
    """The stages' streams on ``device`` (CUDA), or the host's stand-ins (CPU): ``on(stage)`` makes a
    stage's stream current, ``record(stage)`` marks its progress, ``wait(stage, event)`` orders a stage
    after a mark, ``synchronize(event)`` waits on the host."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        self.streams = {stage: torch.cuda.Stream(device) for stage in STAGES} if self.cuda else {}

    def on(self, stage):
        return torch.cuda.stream(self.streams[stage]) if self.cuda else contextlib.nullcontext()

    def record(self, stage):
        if not self.cuda:
            return None
        event = torch.cuda.Event()
        event.record(self.streams[stage])
        return event

    def wait(self, stage, event):
        if event is not None:
            self.streams[stage].wait_event(event)

    def synchronize(self, event):
        if event is not None:
            event.synchronize()


@dataclass(eq=False)
class Flight:
    """One batch on its way: its inputs, every reference's outputs, each implementation's outputs (its own
    copies) with the problems it was called on, the comparison's flags and the event of its last stage."""

    index: int
    batch: object
    wants: dict = field(default_factory=dict)  # reference name -> BatchOutputs
    outputs: dict = field(default_factory=dict)  # name -> BatchOutputs
    called: dict = field(default_factory=dict)  # name -> host indices of the problems called
    flags: dict = field(default_factory=dict)  # name -> bool [P] on the host (pinned on CUDA), True: differs
    eager_batch: object = None  # the batch drawn as written, where the graphed draw is checked
    eager_wants: dict = field(default_factory=dict)  # reference name -> its outputs as written, where its
    # compiled or graphed form is checked
    done: object = None


class Pipeline:
    """Enqueue batches and retire them in order (``depth``: batches on the device at once; ``draws``: where
    batches come from, properties/soak/graphed.py, make_batch's by default)."""

    def __init__(self, device, model, impls, plans, depth=2, streams=None, draws=None):
        self.device, self.model, self.impls, self.plans = device, model, impls, plans
        self.reference_of = {impl.name: impl.impl.reference for impl in impls}
        self.models = {model.name: model}
        for reference in self.reference_of.values():
            self.models.setdefault(reference, model.like(reference))
        self.depth = max(1, depth)
        self.streams = streams or Streams(device)
        self.draws = draws or Draws(device, graphed=False)
        self.in_flight = deque()
        self._checked_plans = set()

    def enqueue(self, index):
        """Put batch ``index`` on the device; returns its Flight."""
        s, plan = self.streams, self.plans.for_batch(index)
        first = plan.index not in self._checked_plans  # checked against the code as written, every bit
        self._checked_plans.add(plan.index)
        with s.on("draw"):
            batch = self.draws.batch(plan, index)
            eager_batch = make_batch(plan, index, self.device) if first and self.draws.graphed else None
            drawn = s.record("draw")
        flight = Flight(index, batch, eager_batch=eager_batch)
        with s.on("model"):
            s.wait("model", drawn)
            for name, model in self.models.items():
                flight.wants[name] = model.run(batch)
                if first and not model.as_written:
                    flight.eager_wants[name] = run_model(batch, model.as_written_route)
            modelled = s.record("model")
        with s.on("implementations"):
            s.wait("implementations", drawn)
            if any(impl.impl.declaration.reads_ids for impl in self.impls):
                s.wait("implementations", modelled)
            for impl in self.impls:
                flight.outputs[impl.name] = impl.enqueue(batch, flight.wants[self.reference_of[impl.name]])
                flight.called[impl.name] = impl.last_called
            s.wait("implementations", modelled)
            for name, got in flight.outputs.items():
                bad = differing(got, flight.wants[self.reference_of[name]])
                if bad is not None:
                    flight.flags[name] = torch.empty(bad.shape, dtype=torch.bool, pin_memory=s.cuda)
                    flight.flags[name].copy_(bad, non_blocking=True)
            flight.done = s.record("implementations")
        self.in_flight.append(flight)
        return flight

    @property
    def full(self):
        return len(self.in_flight) >= self.depth

    def retire(self):
        """The oldest Flight once its last stage has finished."""
        flight = self.in_flight.popleft()
        self.streams.synchronize(flight.done)
        return flight


def disagreeing(flight, name):
    """Host list of the problems where implementation ``name`` differs from its reference in ``flight``."""
    flags = flight.flags.get(name)
    return [] if flags is None else flags.nonzero().flatten().tolist()


def check_as_written(flight):
    """Raise ModelMismatch where the flight's batch or model outputs, from the graphed draw or the compiled
    or graphed model, differ in any bit from the same drawn and modelled as written."""
    pairs = []
    if flight.eager_batch is not None:
        pairs += [("draw", name, getattr(flight.eager_batch, name), getattr(flight.batch, name))
                  for name in ("logits", "bias")]
    for reference, written in flight.eager_wants.items():
        stage = "model" if reference == REFERENCE else f"model {reference}"
        pairs += [(stage, name, getattr(written, name), getattr(flight.wants[reference], name)) for name in FIELDS]
    for stage, name, want, got in pairs:
        differs = 0 if want is None else int((bits(want) != bits(got)).sum())
        if differs:
            raise ModelMismatch(f"the {stage} as run differs from the {stage} as written in {differs} {name} "
                                f"element(s) of plan {flight.batch.plan.index}, batch {flight.index}")


def cross_check_flight(flight, count):
    """Rows of the flight compared with each reference's NumPy form on the CPU (ModelMismatch on any
    difference)."""
    plan = flight.batch.plan
    problems = sample(plan.problems, count, flight.index)
    rows = [cross_check(flight.batch, want, problems, reference) for reference, want in flight.wants.items()]
    return rows[0]  # the same rows, once per reference
