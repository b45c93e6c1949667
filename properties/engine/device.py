"""The CuTe kernel on the GPU through poisoned buffers larger than its contract, and its whole buffers against
the NumPy model's outputs, bit for bit.

ids and weights hold MAX_TOKENS rows and the metadata vector METADATA_SLACK elements past
metadata_size(tile_n), all poisoned before each call, so a write past the last token row, past the metadata
or into an element the kernel must leave (the guard, the unused fields) shows. ``launch``, ``target`` and
``synchronize`` are the only places that touch the kernel or the device (a CPU test replaces them).
"""

from dataclasses import dataclass, replace

import numpy as np
import torch

from kernel import routing
from kernel.layout import EXPERTS, MAX_TOKENS, TOP_K, metadata_size
from properties.engine.cases import Outputs
from properties.engine.compare import describe, disagreements
from properties.engine.implementations import REGISTRY
from properties.engine.poison import IDS_POISON, METADATA_POISON, METADATA_SLACK, WEIGHT_POISON_BITS

KERNEL, MODEL = "cute", "model"


def target():
    """The device the harness routes on: the current CUDA device."""
    return torch.device("cuda", torch.cuda.current_device())


def synchronize():
    torch.cuda.synchronize()


def route_args(buffers):
    """``kernel.routing.route``'s positional arguments for the buffers (the metadata vector whole, slack
    included)."""
    case = buffers.case
    args = (buffers.logits, buffers.bias, buffers.ids, buffers.weights, float(case.scale), case.renormalize)
    if case.has_metadata:
        args += (buffers.metadata_all, case.local_expert_offset, case.num_local_experts, case.tile_n)
    return args


def launch(buffers):
    """Enqueue ``kernel.routing.route`` on the buffers."""
    routing.route(*route_args(buffers))


@dataclass
class Buffers:
    """Device tensors of one call of ``case``; the outputs are views of the larger poisoned buffers."""

    case: object  # the RoutingCase whose scalars the call passes
    logits: torch.Tensor
    bias: torch.Tensor
    ids_all: torch.Tensor
    weights_all: torch.Tensor
    metadata_all: torch.Tensor | None

    @property
    def ids(self):
        return self.ids_all[:self.case.b]

    @property
    def weights(self):
        return self.weights_all[:self.case.b]

    def poison(self):
        self.ids_all.fill_(IDS_POISON)
        self.weights_all.view(torch.int32).fill_(WEIGHT_POISON_BITS)
        if self.metadata_all is not None:
            self.metadata_all.fill_(METADATA_POISON)

    def load(self, case):
        """Copy the logits and bias of ``case`` in and poison the outputs: for a captured graph, whose scalars
        are fixed, so ``case`` may differ from the captured one in its logits and bias only."""
        if not replace(case, logits=self.case.logits, bias=self.case.bias).same_inputs(self.case):
            raise ValueError(f"load: case {case.describe()} differs from the buffers' {self.case.describe()} in "
                             "more than logits and bias")
        self.logits.copy_(torch.from_numpy(case.logits))
        self.bias.copy_(torch.from_numpy(case.bias))
        self.case = case
        self.poison()

    def whole(self):
        """The whole buffers on the host, as Outputs."""
        metadata = None if self.metadata_all is None else self.metadata_all.cpu().numpy()
        return Outputs(self.ids_all.cpu().numpy(), self.weights_all.cpu().numpy(), metadata)

    def contract(self):
        """The outputs the contract covers: b rows, metadata_size(tile_n) elements."""
        whole = self.whole()
        metadata = None if whole.metadata is None else whole.metadata[:metadata_size(self.case.tile_n)]
        return Outputs(whole.ids[:self.case.b], whole.weights[:self.case.b], metadata)

    def mismatches(self):
        """One line per disagreement of the whole buffers with the model's (empty when every bit is equal)."""
        found = disagreements({MODEL: expected(self.case), KERNEL: self.whole()}, tile_n=self.case.tile_n)
        return [describe(d) for d in found]


def report(case, lines):
    """A failure report: the case, then its mismatch lines."""
    return "\n".join([case.describe()] + ["  " + line for line in lines])


def buffers(case, device=None, row_stride=EXPERTS):
    """Poisoned buffers for ``case`` on ``device`` (default ``target()``), logits rows ``row_stride`` apart."""
    device = target() if device is None else device
    rows = torch.zeros((case.b, row_stride), dtype=torch.float32, device=device)
    rows[:, :EXPERTS] = torch.from_numpy(case.logits).to(device)
    metadata = None
    if case.has_metadata:
        metadata = torch.empty(metadata_size(case.tile_n) + METADATA_SLACK, dtype=torch.int32, device=device)
    made = Buffers(case, rows[:, :EXPERTS], torch.from_numpy(case.bias).to(device),
                   torch.empty((MAX_TOKENS, TOP_K), dtype=torch.int32, device=device),
                   torch.empty((MAX_TOKENS, TOP_K), dtype=torch.float32, device=device), metadata)
    made.poison()
    return made


def expected(case):
    """What the whole buffers must read after a call: the model's outputs inside the poison."""
    want = REGISTRY[MODEL].run(case)
    ids = np.full((MAX_TOKENS, TOP_K), IDS_POISON, np.int32)
    weights = np.full((MAX_TOKENS, TOP_K), WEIGHT_POISON_BITS, np.uint32).view(np.float32)
    ids[:case.b], weights[:case.b] = want.ids, want.weights
    metadata = None
    if case.has_metadata:
        metadata = np.concatenate([want.metadata, np.full(METADATA_SLACK, METADATA_POISON, np.int32)])
    return Outputs(ids, weights, metadata)


def route(case, device=None, row_stride=EXPERTS):
    """Route ``case`` once on fresh poisoned buffers; the buffers after the call."""
    made = buffers(case, device, row_stride)
    launch(made)
    synchronize()
    return made
