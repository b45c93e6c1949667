"""What the soak compares: BatchOutputs, and the reference, the model run on the whole batch at once on the
batch's device. The implementations under test are the registry's (properties/engine/implementations.py),
run through properties/soak/launches.py.

On a CUDA device the model's ids and weights (``route_rows``, its float work) may run compiled by
torch.compile: the same source, traced and fused. Inductor's constant folding is off there: it turned the
model's canonical NaN (0x7FFFFFFF) into Triton's NaN literal (0x7FC00000) in the weights of weight_overflow
rows on the H200, where the unfolded compile matched the model bit for bit. The metadata (``metadata_rows``,
integer work whose shapes follow the tile) always runs as written.
"""

from dataclasses import dataclass

import torch

from properties.soak.adapter import EXPERTS, METADATA_POISON, REFERENCE, metadata_rows, route_rows
from properties.soak.plan import metadata_stride

FIELDS = ("ids", "weights", "metadata")
COMPILE_OPTIONS = {"joint_graph_constant_folding": False}
RECOMPILES = 64  # row counts a process may compile the model for (dynamo's default limit is 8)


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


def run_model(batch, route=route_rows):
    """The model (oracles/numpy_model, the same source as on the CPU) on the batch's device; ``route``:
    ``route_rows`` or its compiled form."""
    problems, b = batch.logits.shape[:2]
    rows = problems * b
    ids, weights = route(batch.logits.reshape(rows, EXPERTS), batch.bias.repeat_interleave(b, 0),
                         batch.scale.repeat_interleave(b), batch.renormalize.repeat_interleave(b))
    ids, weights = ids.view(problems, b, -1), weights.view(problems, b, -1)
    return BatchOutputs(ids, weights, model_metadata(batch, ids))


def compiled_route():
    """``route_rows`` compiled by torch.compile (see the module's docstring), once per row count: symbolic
    shapes failed to trace the model on the H200 (a shift by a symbolic table width), so each b of a run's
    problem count gets a compiled form of its own, within RECOMPILES of them."""
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILES)
    return torch.compile(route_rows, dynamic=False, options=COMPILE_OPTIONS)


class Model:
    """The reference; ``compiled``: its ids and weights through ``compiled_route`` (a CUDA device). Where
    the first compiled call raises, it runs as written from then on and ``not_compiled`` says why."""

    name = REFERENCE

    def __init__(self, compiled=False):
        self.compiled, self.not_compiled = compiled, None
        self._route, self._first = (compiled_route() if compiled else route_rows), compiled

    @classmethod
    def on(cls, device, compile_model):
        """The reference for a run on ``device``: compiled where asked and the device is a GPU."""
        return cls(compiled=compile_model and device.type == "cuda")

    def run(self, batch, reference=None):
        if not self._first:
            return run_model(batch, self._route)
        self._first = False
        try:
            return run_model(batch, self._route)
        except Exception as exc:  # whatever stops the compiler, the model still runs, as written
            self.compiled, self._route = False, route_rows
            self.not_compiled = f"torch.compile raised {type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
            return run_model(batch)

    def describe(self):
        """"compiled", or "as written" with the reason where compiling failed."""
        return "compiled" if self.compiled else "as written" + (f" ({self.not_compiled})" if self.not_compiled else "")
