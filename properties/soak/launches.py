"""Any implementation of the registry (properties/engine/implementations.py) over a soak batch: one call of
its interface per problem (b <= 8 rows, one bias) over static buffers on its device, outputs poisoned each
batch; on a CUDA device the calls of a plan are captured into one CUDA graph and replayed for every batch of
the plan. An implementation that declares itself not capturable, or whose capture raises, runs eagerly, and
``eager`` says why. Small batches (minimisation) run eagerly. Problems outside its declaration (b, tiles,
local experts) are not called and not compared.
"""

import numpy as np
import torch

from properties.soak.adapter import (
    EXPERTS,
    IDS_POISON,
    METADATA_POISON,
    TOP_K,
    WEIGHT_POISON_BITS,
    device_of,
    metadata_size,
)
from properties.soak.impls import BatchOutputs
from properties.soak.plan import metadata_stride

EAGER_BELOW = 16  # problems: fewer are run without a graph


def refused_problems(declaration, plan):
    """bool [P] (host): problems of ``plan`` outside what the declaration takes."""
    return np.array([declaration.refusal(plan.b, bool(plan.renormalize[p]), plan.tile_n, int(plan.count[p]))
                     is not None for p in range(plan.problems)], bool)


class _Launches:
    """Static buffers of one plan on the implementation's device and the graph of its per-problem calls."""

    def __init__(self, plan, launched):
        p, b, device = plan.problems, plan.b, launched.device
        declaration = launched.impl.declaration
        self.plan, self.route, self.reads_ids = plan, launched.impl.route, declaration.reads_ids
        self.fields = declaration.compared(plan.tile_n is not None)
        self.called = np.flatnonzero(~refused_problems(declaration, plan))
        # zeros, not empty: warm-up calls run before the first batch is copied in, and implementations may
        # refuse NaN inputs that uninitialised memory holds
        self.logits = torch.zeros((p, b, EXPERTS), dtype=torch.float32, device=device)
        self.bias = torch.zeros((p, EXPERTS), dtype=torch.float32, device=device)
        self.ids = torch.empty((p, b, TOP_K), dtype=torch.int32, device=device)
        self.weights = torch.empty((p, b, TOP_K), dtype=torch.float32, device=device)
        self.metadata = None
        if "metadata" in self.fields:
            self.metadata = torch.empty((p, metadata_stride(plan.tile_n)), dtype=torch.int32, device=device)
        self.graph = None
        if p >= EAGER_BELOW and launched.eager is None:
            self.graph = launched.capture(self)

    def poison(self):
        if not self.reads_ids:
            self.ids.fill_(IDS_POISON)
        self.weights.view(torch.int32).fill_(WEIGHT_POISON_BITS)
        if self.metadata is not None:
            self.metadata.fill_(METADATA_POISON)

    def call(self, problem):
        plan = self.plan
        args = (self.logits[problem], self.bias[problem], self.ids[problem], self.weights[problem],
                float(plan.scale[problem]), bool(plan.renormalize[problem]))
        if self.metadata is None:
            self.route(*args)
        else:
            self.route(*args, self.metadata[problem, :metadata_size(plan.tile_n)], int(plan.offset[problem]),
                       int(plan.count[problem]), plan.tile_n)

    def call_all(self):
        for problem in self.called:
            self.call(int(problem))

    def run(self, batch, reference):
        self.logits.copy_(batch.logits)
        self.bias.copy_(batch.bias)
        if self.reads_ids:
            self.ids.copy_(reference.ids)
        self.poison()
        if self.graph is None:
            self.call_all()
        else:
            self.graph.replay()


class Launched:
    """Implementation ``impl`` of the registry run over soak batches, its buffers rebuilt when the plan
    changes; its outputs come back on the batch's device."""

    def __init__(self, impl):
        self.impl, self.name = impl, impl.name
        self.device = device_of(impl.declaration)
        self.eager = None  # why its calls are not captured, on a CUDA device
        if self.device.type == "cuda" and not impl.declaration.capturable:
            self.eager = "declared not capturable"
        self._current = None
        if self.device.type == "cuda" and impl.declaration.prepare is not None:
            with torch.cuda.device(self.device):
                for renormalize in (False, True):
                    impl.declaration.prepare(renormalize)

    def capture(self, state):
        """The CUDA graph of ``state``'s calls, each variant first called once outside capture (compiled,
        loaded); None (and ``eager`` set) on a CPU or when the capture raises."""
        if self.device.type != "cuda":
            return None
        plan = state.plan
        state.poison()
        for renormalize in (False, True):
            first = [p for p in state.called if plan.renormalize[p] == renormalize][:1]
            if first:
                state.call(int(first[0]))
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                state.call_all()
        except Exception as exc:  # whatever stops the capture, the calls still run, eagerly
            self.eager = f"capture raised {type(exc).__name__}: {(str(exc).strip() or '(no message)').splitlines()[0]}"
            torch.cuda.synchronize(self.device)
            return None
        return graph

    def run(self, batch, reference):
        """BatchOutputs of the batch: the fields it writes, ``called`` the problems it was called on."""
        state = self._current
        if batch.plan.problems < EAGER_BELOW:  # a minimisation: the plan's graph stays
            state = _Launches(batch.plan, self)
        elif state is None or state.plan is not batch.plan:
            self._current = state = None  # free the previous graph first
            self._current = state = _Launches(batch.plan, self)
        if not state.fields or not state.called.size:
            return BatchOutputs(None, None, None, None)
        state.run(batch, reference)
        to = batch.logits.device
        called = torch.zeros(batch.plan.problems, dtype=torch.bool)
        called[torch.from_numpy(state.called)] = True
        pick = lambda field, x: x.to(to) if field in state.fields else None  # noqa: E731
        return BatchOutputs(pick("ids", state.ids), pick("weights", state.weights), pick("metadata", state.metadata),
                            None if state.called.size == batch.plan.problems else called.to(to))
