"""The implementations under test on a CUDA device, each launched once per problem (b <= 8 rows, one bias)
over static buffers, the launches of a plan captured into one CUDA graph and replayed for every batch of
the plan; outputs start poisoned each batch. Small batches (minimisation) launch eagerly.

- "cute": the CuTe kernel ``kernel.routing.route`` (ids, weights and metadata in one launch);
- "triton": the Triton oracle ``fused_musespark1x_routing`` (ids, weights);
- "flashinfer": FlashInfer's routingIndicesDynBlockKernel on the reference's ids (metadata), writing
  straight into the metadata layout through views.
"""

import numpy as np
import torch

from properties.soak.adapter import (
    EXPERTS,
    IDS_POISON,
    MAX_CTAS,
    META_CTA_BATCH,
    META_CTA_LIMIT,
    META_EXPANDED_TO_PERMUTED,
    META_PERMUTED_TO_TOKEN,
    METADATA_POISON,
    ROUTES,
    TOP_K,
    WEIGHT_POISON_BITS,
    metadata_size,
)
from properties.soak.impls import BatchOutputs
from properties.soak.plan import metadata_stride

EAGER_BELOW = 16  # problems: fewer are launched without a graph


class _Launches:
    """Static buffers of one plan and the graph of its per-problem launches."""

    def __init__(self, plan, device, launch, with_metadata, reads_ids):
        p, b = plan.problems, plan.b
        self.plan, self.launch = plan, launch
        self.logits = torch.empty((p, b, EXPERTS), dtype=torch.float32, device=device)
        self.bias = torch.empty((p, EXPERTS), dtype=torch.float32, device=device)
        self.ref_ids = torch.empty((p, b, TOP_K), dtype=torch.int32, device=device) if reads_ids else None
        self.ids = torch.empty((p, b, TOP_K), dtype=torch.int32, device=device)
        self.weights = torch.empty((p, b, TOP_K), dtype=torch.float32, device=device)
        self.metadata = None
        if with_metadata and plan.tile_n is not None:
            self.metadata = torch.empty((p, metadata_stride(plan.tile_n)), dtype=torch.int32, device=device)
        self.graph = None
        if p >= EAGER_BELOW:
            self._poison()
            for renormalize in (False, True):  # each variant launched once outside capture: compiled, loaded
                first = np.flatnonzero(plan.renormalize == renormalize)[:1]
                if first.size:
                    launch(self, int(first[0]))
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self._launch_all()

    def _poison(self):
        self.ids.fill_(IDS_POISON)
        self.weights.view(torch.int32).fill_(WEIGHT_POISON_BITS)
        if self.metadata is not None:
            self.metadata.fill_(METADATA_POISON)

    def _launch_all(self):
        for problem in range(self.plan.problems):
            self.launch(self, problem)

    def run(self, batch, reference):
        self.logits.copy_(batch.logits)
        self.bias.copy_(batch.bias)
        if self.ref_ids is not None:
            self.ref_ids.copy_(reference.ids)
        self._poison()
        if self.graph is None:
            self._launch_all()
        else:
            self.graph.replay()


class _Graphed:
    """An implementation run through _Launches, rebuilt when the plan changes."""

    with_metadata, reads_ids = True, False

    def __init__(self, device):
        self.device = torch.device(device)
        self._current = None

    def run(self, batch, reference):
        state = self._current
        if state is None or state.plan is not batch.plan:
            self._current = state = None  # free the previous graph first
            state = _Launches(batch.plan, self.device, self._launch, self.with_metadata, self.reads_ids)
            if batch.plan.problems >= EAGER_BELOW:
                self._current = state
        state.run(batch, reference)
        return self._outputs(state)

    def _outputs(self, state):
        return BatchOutputs(state.ids, state.weights, state.metadata)


class Cute(_Graphed):
    name = "cute"

    def __init__(self, device):
        from kernel import routing

        super().__init__(device)
        self._route = routing.route
        with torch.cuda.device(self.device):
            for renormalize in (False, True):
                routing.prepare(renormalize)

    def _launch(self, state, p):
        plan = state.plan
        args = (state.logits[p], state.bias[p], state.ids[p], state.weights[p], float(plan.scale[p]),
                bool(plan.renormalize[p]))
        if state.metadata is None:
            self._route(*args)
        else:
            self._route(*args, state.metadata[p, :metadata_size(plan.tile_n)], int(plan.offset[p]),
                        int(plan.count[p]), plan.tile_n)


class Triton(_Graphed):
    name = "triton"
    with_metadata = False

    def __init__(self, device):
        from oracles.triton_routing import fused_musespark1x_routing

        super().__init__(device)
        self._route = fused_musespark1x_routing

    def _launch(self, state, p):
        plan = state.plan
        self._route(state.logits[p], state.bias[p], renormalize=bool(plan.renormalize[p]),
                    routed_scaling_factor=float(plan.scale[p]), out_weights=state.weights[p], out_ids=state.ids[p])

    def _outputs(self, state):
        return BatchOutputs(state.ids, state.weights, None)


class FlashInfer(_Graphed):
    name = "flashinfer"
    reads_ids = True

    def __init__(self, device):
        from oracles.flashinfer_routing import enqueue

        super().__init__(device)
        self._enqueue = enqueue

    def run(self, batch, reference):
        if batch.plan.tile_n is None:
            return BatchOutputs(None, None, None)
        return super().run(batch, reference)

    def _launch(self, state, p):
        plan, meta = state.plan, state.metadata[p]
        buffers = self._enqueue.DeviceBuffers(
            state.ref_ids[p], meta[META_EXPANDED_TO_PERMUTED:META_EXPANDED_TO_PERMUTED + ROUTES],
            meta[META_CTA_BATCH:META_CTA_BATCH + MAX_CTAS], meta[META_CTA_LIMIT:META_CTA_LIMIT + MAX_CTAS],
            meta[META_PERMUTED_TO_TOKEN:META_PERMUTED_TO_TOKEN + MAX_CTAS * plan.tile_n],
            meta[:self._enqueue.SCALARS], plan.tile_n)  # the two sizes are META_PADDED_TOKENS, META_NUM_CTAS
        self._enqueue.enqueue(buffers, int(plan.offset[p]), int(plan.count[p]))

    def _outputs(self, state):
        return BatchOutputs(None, None, state.metadata)


GPU_IMPLEMENTATIONS = {impl.name: impl for impl in (Cute, Triton, FlashInfer)}
