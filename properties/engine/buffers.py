"""One routing call's tensors, poisoned, and the per-case path of every implementation: a RoutingCase in,
the implementation's ``route`` called on views of larger poisoned buffers, Outputs out.

ids and weights hold MAX_TOKENS rows and the metadata vector METADATA_SLACK elements past
metadata_size(tile_n), all poisoned before each call, so a write past the last token row or past the
metadata shows (``run`` refuses it; the kernel's tests compare the whole buffers, ``Buffers.mismatches``).
"""

from dataclasses import dataclass, replace

import numpy as np
import torch

import oracles.numpy_model as model
from kernel.layout import EXPERTS, MAX_TOKENS, TOP_K, metadata_size
from properties.engine.cases import FIELDS, Outputs
from properties.engine.compare import REFERENCE, describe, disagreements
from properties.engine.poison import IDS_POISON, METADATA_POISON, METADATA_SLACK, WEIGHT_POISON_BITS

KERNEL = "cute"


class WroteOutside(AssertionError):
    """An implementation wrote past the outputs it was given."""


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


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

    @property
    def metadata(self):
        return None if self.metadata_all is None else self.metadata_all[:metadata_size(self.case.tile_n)]

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
        found = disagreements({REFERENCE: expected(self.case), KERNEL: self.whole()}, tile_n=self.case.tile_n)
        return [describe(d) for d in found]


def report(case, lines):
    """A failure report: the case, then its mismatch lines."""
    return "\n".join([case.describe()] + ["  " + line for line in lines])


def make(case, device, row_stride=EXPERTS):
    """Poisoned buffers for ``case`` on ``device``, logits rows ``row_stride`` apart."""
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
    ids, weights = model.route(case.logits, case.bias, case.scale, case.renormalize)
    whole_ids = np.full((MAX_TOKENS, TOP_K), IDS_POISON, np.int32)
    whole_weights = np.full((MAX_TOKENS, TOP_K), WEIGHT_POISON_BITS, np.uint32).view(np.float32)
    whole_ids[:case.b], whole_weights[:case.b] = ids, weights
    metadata = None
    if case.has_metadata:
        meta = model.routing_metadata(ids, case.local_expert_offset, case.num_local_experts, case.tile_n,
                                      fill=METADATA_POISON)
        metadata = np.concatenate([meta, np.full(METADATA_SLACK, METADATA_POISON, np.int32)])
    return Outputs(whole_ids, whole_weights, metadata)


def call_args(buffers, with_metadata):
    """The interface's arguments for the buffers: the contract's views, metadata only ``with_metadata``."""
    case = buffers.case
    args = (buffers.logits, buffers.bias, buffers.ids, buffers.weights, float(case.scale), case.renormalize)
    if with_metadata:
        args += (buffers.metadata, case.local_expert_offset, case.num_local_experts, case.tile_n)
    return args


def _outside(made):
    """The parts of the buffers past the contract that no longer hold the poison, named."""
    b, whole = made.case.b, made.whole()
    past = []
    if (whole.ids[b:] != IDS_POISON).any():
        past.append(f"ids rows {b}..{MAX_TOKENS - 1}")
    if (whole.weights[b:].view(np.uint32) != np.uint32(WEIGHT_POISON_BITS)).any():
        past.append(f"weights rows {b}..{MAX_TOKENS - 1}")
    if whole.metadata is not None and (whole.metadata[metadata_size(made.case.tile_n):] != METADATA_POISON).any():
        past.append("metadata past metadata_size(tile_n)")
    return past


def device_of(declaration):
    """The torch device an implementation's tensors go to here: the current CUDA device, or the CPU."""
    if declaration.device_type() == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def reference_ids(case):
    """The model's ids of ``case``, as a reads_ids implementation finds them in ``ids``."""
    return torch.from_numpy(model.route(case.logits, case.bias, case.scale, case.renormalize)[0])


def run(impl, case):
    """Outputs of Implementation ``impl`` on ``case`` (the fields it writes; None elsewhere), or None when the
    case is outside its declaration. A reads_ids implementation finds the model's ids in ``ids``. Raises
    WroteOutside when it wrote past its outputs."""
    declaration = impl.declaration
    if declaration.refusal(case.b, case.renormalize, case.tile_n, case.num_local_experts) is not None:
        return None
    fields = declaration.compared(case.has_metadata)
    if not fields:  # it writes only what this case does not ask for (FlashInfer's metadata, no tile)
        return Outputs(None, None, None)
    device = device_of(declaration)
    made = make(case, device)
    if declaration.reads_ids:
        made.ids.copy_(reference_ids(case))
    impl.route(*call_args(made, "metadata" in fields))
    synchronize(device)
    past = _outside(made)
    if past:
        raise WroteOutside(f"{impl.name} wrote outside its outputs on a {case.generator} case: {', '.join(past)}")
    got = made.contract()
    return Outputs(*(getattr(got, f) if f in fields else None for f in FIELDS))
