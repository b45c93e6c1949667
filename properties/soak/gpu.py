"""The implementations under test on a CUDA device, each launched once per problem (b <= 8 rows, one bias)
over static buffers, the launches of a plan captured into one CUDA graph and replayed for every batch of
the plan; outputs start poisoned each batch. Small batches (minimisation) launch eagerly.

- "cute": the CuTe kernel ``kernel.routing.route`` (ids, weights and metadata in one launch);
- "triton": the Triton oracle ``fused_musespark1x_routing`` (ids, weights);
- "flashinfer": FlashInfer's routingIndicesDynBlockKernel on the reference's ids (metadata).
"""

import numpy as np
import torch

from oracles.flashinfer_routing.dyn_block import place_in_meta
from properties.soak.adapter import (
    EXPERTS,
    IDS_POISON,
    MAX_CTAS,
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

    def __init__(self, plan, device, impl):
        p, b = plan.problems, plan.b
        self.plan, self.launch = plan, impl.launch
        # zeros, not empty: the warm-up launches below run before the first batch is copied in, and the
        # implementations refuse NaN inputs that uninitialised memory may hold
        self.logits = torch.zeros((p, b, EXPERTS), dtype=torch.float32, device=device)
        self.bias = torch.zeros((p, EXPERTS), dtype=torch.float32, device=device)
        self.ref_ids = torch.empty((p, b, TOP_K), dtype=torch.int32, device=device) if impl.reads_ids else None
        self.ids = torch.empty((p, b, TOP_K), dtype=torch.int32, device=device)
        self.weights = torch.empty((p, b, TOP_K), dtype=torch.float32, device=device)
        self.metadata = None
        if impl.with_metadata and plan.tile_n is not None:
            self.metadata = torch.empty((p, metadata_stride(plan.tile_n)), dtype=torch.int32, device=device)
        self.scratch = impl.scratch(plan, device)
        self.graph = None
        if p >= EAGER_BELOW:
            self._poison()
            for renormalize in (False, True):  # each variant launched once outside capture: compiled, loaded
                first = np.flatnonzero(plan.renormalize == renormalize)[:1]
                if first.size:
                    self.launch(self, int(first[0]))
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self._launch_all()

    def _poison(self):
        self.ids.fill_(IDS_POISON)
        self.weights.view(torch.int32).fill_(WEIGHT_POISON_BITS)
        for buffer in [self.metadata, *self.scratch.values()]:
            if buffer is not None:
                buffer.fill_(METADATA_POISON)

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
        if batch.plan.problems < EAGER_BELOW:  # a minimisation: the plan's graph stays
            state = _Launches(batch.plan, self.device, self)
        elif state is None or state.plan is not batch.plan:
            self._current = state = None  # free the previous graph first
            self._current = state = _Launches(batch.plan, self.device, self)
        state.run(batch, reference)
        return self.outputs(state)

    def scratch(self, plan, device):
        """Buffers of the implementation's own layout, poisoned with the metadata's poison each batch."""
        return {}

    def outputs(self, state):
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

    def launch(self, state, p):
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

    def launch(self, state, p):
        plan = state.plan
        self._route(state.logits[p], state.bias[p], renormalize=bool(plan.renormalize[p]),
                    routed_scaling_factor=float(plan.scale[p]), out_weights=state.weights[p], out_ids=state.ids[p])

    def outputs(self, state):
        return BatchOutputs(state.ids, state.weights, None)


class FlashInfer(_Graphed):
    """Outputs in FlashInfer's own buffers (one row per problem, each 16-byte aligned, as the oracle's
    device_buffers allocates them), moved into the metadata layout after the launches as to_meta does."""

    name = "flashinfer"
    reads_ids = True
    _SCALARS_ROW = 4  # the two sizes, in a row of 16 bytes

    def __init__(self, device):
        from oracles.flashinfer_routing import enqueue

        super().__init__(device)
        self._enqueue = enqueue

    def run(self, batch, reference):
        if batch.plan.tile_n is None:
            return BatchOutputs(None, None, None)
        return super().run(batch, reference)

    def scratch(self, plan, device):
        if plan.tile_n is None:
            return {}
        sizes = {"expanded": ROUTES, "cta_batch": MAX_CTAS, "cta_limit": MAX_CTAS,
                 "permuted": MAX_CTAS * plan.tile_n, "scalars": self._SCALARS_ROW}
        return {name: torch.empty((plan.problems, n), dtype=torch.int32, device=device) for name, n in sizes.items()}

    def launch(self, state, p):
        plan, out = state.plan, state.scratch
        buffers = self._enqueue.DeviceBuffers(
            ids=state.ref_ids[p], expanded_to_permuted=out["expanded"][p], cta_batch=out["cta_batch"][p],
            cta_limit=out["cta_limit"][p], permuted_to_token=out["permuted"][p],
            scalars=out["scalars"][p, :self._enqueue.SCALARS], tile_n=plan.tile_n)
        self._enqueue.enqueue(buffers, int(plan.offset[p]), int(plan.count[p]))

    def outputs(self, state):
        out = state.scratch
        meta = place_in_meta(state.metadata, out["scalars"][:, 0], out["scalars"][:, 1], out["expanded"],
                             out["cta_batch"], out["cta_limit"], out["permuted"], state.plan.tile_n)
        return BatchOutputs(None, None, meta)


GPU_IMPLEMENTATIONS = {impl.name: impl for impl in (Cute, Triton, FlashInfer)}
