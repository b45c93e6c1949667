"""One routing call's tensors, poisoned, and the per-case path of every implementation: a RoutingCase in,
the implementation's ``route`` called on views of larger poisoned buffers, Outputs out.

ids and weights hold MAX_TOKENS rows and the metadata vector METADATA_SLACK elements past
metadata_size(tile_n), all poisoned before each call, so a write past the last token row or past the
metadata shows (``run`` refuses it; the kernel's tests compare the whole buffers, ``Buffers.mismatches``).

Every tensor of a call is a view of one 32-bit device buffer, filled by one copy from the host and read back
by one: each copy waits for the GPU, and on a GPU shared by the gate's workers a wait, not the work, is the
cost of a case.
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


# Each part of the buffer starts on a multiple of this many words (256 bytes, what the CUDA allocator gives a
# tensor of its own), so every view is as aligned as a separately allocated tensor.
PART_WORDS = 64


def _part(words):
    """``words`` rounded up to a whole number of PART_WORDS."""
    return -(-words // PART_WORDS) * PART_WORDS


@dataclass(frozen=True)
class Layout:
    """Where each part starts in the buffer of ``b`` logits rows ``row_stride`` apart, in words: logits at 0,
    then bias, ids, weights (ids and weights MAX_TOKENS rows each) and ``metadata_words`` of metadata; ``end``
    the buffer's size."""

    b: int
    row_stride: int
    metadata_words: int

    @property
    def bias(self):
        return _part(self.b * self.row_stride)

    @property
    def ids(self):
        return self.bias + _part(EXPERTS)

    @property
    def weights(self):
        return self.ids + MAX_TOKENS * TOP_K

    @property
    def metadata(self):
        return self.weights + MAX_TOKENS * TOP_K

    @property
    def end(self):
        return self.metadata + self.metadata_words


@dataclass
class Buffers:
    """Device tensors of one call of ``case``, views of one buffer ``storage``; the outputs are views of the
    larger poisoned parts."""

    case: object  # the RoutingCase whose scalars the call passes
    storage: torch.Tensor  # int32, its parts where ``layout`` says
    layout: Layout
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

    def image(self, case):
        """The host words ``storage`` must hold before a call of ``case``: its logits and bias, zero between
        rows, and the outputs poisoned."""
        at = self.layout
        words = np.zeros(at.end, np.uint32)
        words[:at.b * at.row_stride].reshape(at.b, at.row_stride)[:, :EXPERTS] = case.logits.view(np.uint32)
        words[at.bias:at.bias + EXPERTS] = case.bias.view(np.uint32)
        words[at.ids:at.weights] = np.int32(IDS_POISON).view(np.uint32)
        words[at.weights:at.metadata] = WEIGHT_POISON_BITS
        words[at.metadata:at.end] = np.int32(METADATA_POISON).view(np.uint32)
        return words.view(np.int32)

    def load(self, case):
        """Copy the logits and bias of ``case`` in and poison the outputs: for a captured graph, whose scalars
        are fixed, so ``case`` may differ from the captured one in its logits and bias only."""
        if not replace(case, logits=self.case.logits, bias=self.case.bias).same_inputs(self.case):
            raise ValueError(f"load: case {case.describe()} differs from the buffers' {self.case.describe()} in "
                             "more than logits and bias")
        self.storage.copy_(torch.from_numpy(self.image(case)))
        self.case = case

    def poison(self):
        """Poison the outputs again (the inputs are copied in again as they are)."""
        self.load(self.case)

    def whole(self):
        """The whole buffers on the host, as Outputs (one copy from the device)."""
        words, at = self.storage.cpu().numpy(), self.layout
        shape = (MAX_TOKENS, TOP_K)
        return Outputs(words[at.ids:at.weights].reshape(shape),
                       words[at.weights:at.metadata].view(np.float32).reshape(shape),
                       words[at.metadata:at.end] if self.metadata_all is not None else None)

    def contract(self, whole=None):
        """The outputs the contract covers: b rows, metadata_size(tile_n) elements (of ``whole``, default
        read now)."""
        whole = self.whole() if whole is None else whole
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
    """Poisoned buffers for ``case`` on ``device``, logits rows ``row_stride`` apart: one copy to the device."""
    at = Layout(case.b, row_stride, metadata_size(case.tile_n) + METADATA_SLACK if case.has_metadata else 0)
    storage = torch.empty(at.end, dtype=torch.int32, device=device)
    floats, shape = storage.view(torch.float32), (MAX_TOKENS, TOP_K)
    made = Buffers(case, storage, at, floats[:at.b * row_stride].view(at.b, row_stride)[:, :EXPERTS],
                   floats[at.bias:at.bias + EXPERTS], storage[at.ids:at.weights].view(shape),
                   floats[at.weights:at.metadata].view(shape),
                   storage[at.metadata:at.end] if case.has_metadata else None)
    storage.copy_(torch.from_numpy(made.image(case)))
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


def _outside(case, whole):
    """The parts of the whole buffers ``whole`` past the contract of ``case`` that no longer hold the poison,
    named."""
    b = case.b
    past = []
    if (whole.ids[b:] != IDS_POISON).any():
        past.append(f"ids rows {b}..{MAX_TOKENS - 1}")
    if (whole.weights[b:].view(np.uint32) != np.uint32(WEIGHT_POISON_BITS)).any():
        past.append(f"weights rows {b}..{MAX_TOKENS - 1}")
    if whole.metadata is not None and (whole.metadata[metadata_size(case.tile_n):] != METADATA_POISON).any():
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
    synchronize(device)  # an implementation may launch on a stream of its own
    whole = made.whole()
    past = _outside(made.case, whole)
    if past:
        raise WroteOutside(f"{impl.name} wrote outside its outputs on a {case.generator} case: {', '.join(past)}")
    got = made.contract(whole)
    return Outputs(*(getattr(got, f) if f in fields else None for f in FIELDS))
