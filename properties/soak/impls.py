"""What the soak compares: BatchOutputs, and the reference, the model run on the whole batch at once on the
batch's device. The implementations under test are the registry's (properties/engine/implementations.py),
run through properties/soak/launches.py.
"""

from dataclasses import dataclass

import torch

from properties.soak.adapter import EXPERTS, METADATA_POISON, REFERENCE, metadata_rows, route_rows
from properties.soak.plan import metadata_stride

FIELDS = ("ids", "weights", "metadata")


@dataclass(frozen=True, eq=False)
class BatchOutputs:
    """What an implementation wrote for a batch of P problems of b rows; None for a field it does not
    produce. ids int32 [P, b, 8], weights float32 [P, b, 8], metadata int32 [P, metadata_stride(tile_n)];
    called bool [P], the problems it was called on (None: every one)."""

    ids: torch.Tensor | None
    weights: torch.Tensor | None
    metadata: torch.Tensor | None
    called: torch.Tensor | None = None


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
