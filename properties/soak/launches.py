"""Any implementation of the registry (properties/engine/implementations.py) over a soak batch: one call of
its interface per problem (b <= 8 rows, one bias) over static buffers on its device, outputs poisoned each
batch. On a CUDA device the calls of a plan are captured into one CUDA graph of independent branches (each a
chain of calls on a capture stream of its own, one-CTA launches with PDL between neighbours, as in
production) and the graph is replayed for every batch of the plan; the branches let the GPU run many
problems at once instead of one launch after another. An implementation that declares itself not
capturable, or whose capture raises, runs eagerly, and ``eager`` says why. Small batches (minimisation) run
eagerly. Problems outside its declaration (b, tiles, local experts) are not called and not compared.

Everything is enqueued on the current stream; a batch's outputs are copies of its own, so the next batch
may run while they are compared.
"""

import numpy as np
import torch

from kernel.layout import EXPERTS, TOP_K, metadata_size
from properties.engine.buffers import device_of
from properties.engine.poison import IDS_POISON, METADATA_POISON, WEIGHT_POISON_BITS
from properties.soak.graphed import EAGER_BELOW, capturing
from properties.soak.impls import BatchOutputs
from properties.soak.plan import metadata_stride

# Graph branches per SM. On the H200 (132 SMs) one chain of one-CTA launches ran 0.41 M launches/s, 16 to 264
# independent chains 5.0 to 5.8 M/s, the plateau from 16 on (properties/results/graph-branches-h200.json).
BRANCHES_PER_SM = 0.25


def branch_count(device, problems):
    """Graph branches for ``problems`` calls on ``device``: a share of its SMs, at most one per problem."""
    if device.type != "cuda":
        return 1
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return max(1, min(problems, round(sms * BRANCHES_PER_SM)))


def split(problems, branches):
    """The problems [0, len) of ``problems`` (an index array) cut into ``branches`` contiguous runs of sizes
    that differ by at most one."""
    bounds = [len(problems) * k // branches for k in range(branches + 1)]
    return [problems[bounds[k]:bounds[k + 1]] for k in range(branches)]


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
        # a metadata-only implementation has nothing to write in a plan without metadata: it is not called
        self.called = np.flatnonzero(~refused_problems(declaration, plan)) if self.fields else np.arange(0)
        self.called_mask = None  # bool [P] on the device, where some problems are not called
        if self.called.size != p:
            self.called_mask = torch.zeros(p, dtype=torch.bool)
            self.called_mask[torch.from_numpy(self.called)] = True
            self.called_mask = self.called_mask.to(device)
        # zeros, not empty: warm-up calls run before the first batch is copied in, and implementations may
        # refuse NaN inputs that uninitialised memory holds
        self.logits = torch.zeros((p, b, EXPERTS), dtype=torch.float32, device=device)
        self.bias = torch.zeros((p, EXPERTS), dtype=torch.float32, device=device)
        self.ids = torch.empty((p, b, TOP_K), dtype=torch.int32, device=device)
        self.weights = torch.empty((p, b, TOP_K), dtype=torch.float32, device=device)
        self.metadata = None
        if "metadata" in self.fields:
            self.metadata = torch.empty((p, metadata_stride(plan.tile_n)), dtype=torch.int32, device=device)
        self.graph, self.branches = None, 1
        if p >= EAGER_BELOW and self.called.size and launched.eager is None:
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

    def call_all(self, problems=None):
        for problem in self.called if problems is None else problems:
            self.call(int(problem))

    def enqueue(self, batch, reference):
        """Run the batch on the current stream; BatchOutputs of copies of what it wrote."""
        self.logits.copy_(batch.logits)
        self.bias.copy_(batch.bias)
        if self.reads_ids:
            self.ids.copy_(reference.ids)
        self.poison()
        if self.graph is None:
            self.call_all()
        else:
            self.graph.replay()
        own = lambda field, x: x.clone() if field in self.fields else None  # noqa: E731
        return own("ids", self.ids), own("weights", self.weights), own("metadata", self.metadata)


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
        self._streams = []
        self.last_called = None  # host indices of the problems the last enqueued batch was called on
        if self.device.type == "cuda" and impl.declaration.prepare is not None:
            with torch.cuda.device(self.device):
                for renormalize in (False, True):
                    impl.declaration.prepare(renormalize)

    def _branch_streams(self, count):
        while len(self._streams) < count:
            self._streams.append(torch.cuda.Stream(self.device))
        return self._streams[:count]

    def capture(self, state):
        """The CUDA graph of ``state``'s calls in branches (``state.branches`` set), each variant first called
        once outside capture (compiled, loaded); None (and ``eager`` set) on a CPU or when the capture raises."""
        if self.device.type != "cuda":
            return None
        plan = state.plan
        state.poison()
        for renormalize in (False, True):
            first = [p for p in state.called if plan.renormalize[p] == renormalize][:1]
            if first:
                state.call(int(first[0]))
        runs = split(state.called, branch_count(self.device, max(1, len(state.called))))
        streams = self._branch_streams(len(runs))
        graph = torch.cuda.CUDAGraph()
        try:
            with capturing(graph):
                fork = torch.cuda.current_stream()
                for stream, problems in zip(streams, runs):
                    stream.wait_stream(fork)
                    with torch.cuda.stream(stream):
                        state.call_all(problems)
                for stream in streams:
                    fork.wait_stream(stream)
        except Exception as exc:  # whatever stops the capture, the calls still run, eagerly
            self.eager = f"capture raised {type(exc).__name__}: {(str(exc).strip() or '(no message)').splitlines()[0]}"
            torch.cuda.synchronize(self.device)
            return None
        state.branches = len(runs)
        return graph

    def _state(self, plan):
        """The buffers and graph of ``plan``: built when the plan changes (the previous graph freed once the
        current stream has finished with it); a minimisation's small plan gets eager buffers of its own."""
        if plan.problems < EAGER_BELOW:  # a minimisation: the plan's graph stays
            return _Launches(plan, self)
        if self._current is None or self._current.plan is not plan:
            if self._current is not None and self.device.type == "cuda":
                torch.cuda.current_stream(self.device).synchronize()
            self._current = None
            self._current = _Launches(plan, self)
        return self._current

    @property
    def branches(self):
        """Graph branches of the current plan (1: a single chain or eager calls)."""
        return 1 if self._current is None else self._current.branches

    def enqueue(self, batch, reference):
        """BatchOutputs of the batch, enqueued on the current stream: the fields it writes (copies of its own),
        ``called`` the problems it was called on."""
        state = self._state(batch.plan)
        self.last_called = state.called
        if not state.fields or not state.called.size:
            return BatchOutputs(None, None, None, None)
        ids, weights, metadata = state.enqueue(batch, reference)
        to = lambda x: None if x is None else x.to(batch.logits.device)  # noqa: E731
        return BatchOutputs(to(ids), to(weights), to(metadata), to(state.called_mask))
