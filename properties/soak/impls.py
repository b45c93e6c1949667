"""Implementations as the soak engine calls them: ``run(batch, reference) -> BatchOutputs`` on the batch's
device. The model (the reference) and, for CPU tests and planted-fault runs, the model with a planted fault;
the GPU implementations are in properties/soak/gpu.py.
"""

import dataclasses
from dataclasses import dataclass

import torch

from properties.soak.adapter import EXPERTS, METADATA_POISON, REFERENCE, metadata_rows, metadata_size, route_rows
from properties.soak.plan import metadata_stride

FIELDS = ("ids", "weights", "metadata")


@dataclass(frozen=True, eq=False)
class BatchOutputs:
    """What an implementation wrote for a batch of P problems of b rows; None for a field it does not
    produce. ids int32 [P, b, 8], weights float32 [P, b, 8], metadata int32 [P, metadata_stride(tile_n)]."""

    ids: torch.Tensor | None
    weights: torch.Tensor | None
    metadata: torch.Tensor | None


def model_metadata(batch, ids):
    """The model's metadata of ``ids`` [P, b, 8] for the batch's tile and local ranges, padded to the
    stride with the poison; None when the plan asks for no metadata."""
    tile = batch.plan.tile_n
    if tile is None:
        return None
    meta = metadata_rows(ids, batch.offset, batch.count, tile, METADATA_POISON)
    return torch.nn.functional.pad(meta, (0, metadata_stride(tile) - meta.shape[1]), value=METADATA_POISON)


def run_model(batch):
    """The model (oracles/numpy_model, the same source as on the CPU) on the batch's device."""
    problems, b = batch.logits.shape[:2]
    rows = problems * b
    ids, weights = route_rows(batch.logits.reshape(rows, EXPERTS), batch.bias.repeat_interleave(b, 0),
                              batch.scale.repeat_interleave(b), batch.renormalize.repeat_interleave(b))
    ids, weights = ids.view(problems, b, -1), weights.view(problems, b, -1)
    return BatchOutputs(ids, weights, model_metadata(batch, ids))


class Model:
    """The reference."""

    name = REFERENCE

    def run(self, batch, reference=None):
        return run_model(batch)


def _ties_to_highest_index(batch, reference):
    """The model on the experts in reverse order, ids mapped back: equal values go to the highest index."""
    mirrored = run_model(dataclasses.replace(batch, logits=batch.logits.flip(-1), bias=batch.bias.flip(-1)))
    ids = (EXPERTS - 1 - mirrored.ids).to(torch.int32)
    return BatchOutputs(ids, mirrored.weights, model_metadata(batch, ids))


def _writes_the_guard(batch, reference):
    """The model's outputs, with the metadata guard written (0) where every expert is local."""
    if reference.metadata is None:
        return reference
    meta = reference.metadata.clone()
    guard = metadata_size(batch.plan.tile_n) - 1
    meta[:, guard] = torch.where(batch.count == EXPERTS, 0, meta[:, guard])
    return BatchOutputs(reference.ids, reference.weights, meta)


FAULTS = {"ties_to_highest_index": _ties_to_highest_index, "writes_the_guard": _writes_the_guard}


class PlantedFault:
    """The model with a planted fault (FAULTS), standing in for an implementation under test."""

    def __init__(self, fault):
        if fault not in FAULTS:
            raise ValueError(f"fault must be one of {sorted(FAULTS)}, got {fault!r}")
        self.name = f"fault-{fault}"
        self._run = FAULTS[fault]

    def run(self, batch, reference):
        return self._run(batch, reference)
