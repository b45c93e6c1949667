"""What the soak compares: BatchOutputs, and the references, each a model (properties/engine/references.py:
the Muse Spark model, or another an implementation declares) run on the whole batch at once on the batch's
device. The implementations under test are the registry's (properties/engine/implementations.py),
run through properties/soak/launches.py.

On a CUDA device the model's ids and weights (``route_rows``, its float work) may run compiled by
torch.compile: the same source, traced and fused. Inductor's constant folding is off there: it turned the
model's canonical NaN (0x7FFFFFFF) into Triton's NaN literal (0x7FC00000) in the weights of weight_overflow
rows on the H200, where the unfolded compile matched the model bit for bit. The metadata (``metadata_rows``,
integer work whose shapes follow the tile) always runs as written.
"""

import functools
from dataclasses import dataclass

import torch

from kernel.layout import EXPERTS
from oracles.numpy_model.routing import metadata_rows, route_rows
from properties.engine.compare import REFERENCE
from properties.engine.poison import METADATA_POISON
from properties.engine.references import REFERENCES
from properties.soak.graphed import EAGER_BELOW, Replays
from properties.soak.plan import Batch, metadata_stride

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


def compiled_route(route=route_rows):
    """``route`` (a reference's route_rows) compiled by torch.compile (see the module's docstring), once per row count: symbolic
    shapes failed to trace the model on the H200 (a shift by a symbolic table width), so each b of a run's
    problem count gets a compiled form of its own, within RECOMPILES of them."""
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILES)
    return torch.compile(route, dynamic=False, options=COMPILE_OPTIONS)


def _plan_outputs(route, plan, logits, bias, scale, renormalize, offset, count):
    """The model's (ids, weights, metadata) of one batch of ``plan`` through ``route``, for Replays (a function
    of its inputs alone: a bound method would tie the Model and its graph into a reference cycle)."""
    out = run_model(Batch(plan, -1, logits, bias, scale, renormalize, offset, count), route)
    return out.ids, out.weights, out.metadata


class Model:
    """A reference (``reference``: its name in properties/engine/references.py); ``compiled``: its ids and weights through ``compiled_route`` (a CUDA device), where the
    first compiled call raises it runs as written from then on and ``not_compiled`` says why; ``graphed``:
    each plan's run replayed from a CUDA graph (properties/soak/graphed.py)."""

    def __init__(self, compiled=False, graphed=False, reference=REFERENCE):
        self.name, self.as_written_route = reference, REFERENCES[reference]
        self.compiled, self.not_compiled, self._asked = compiled, None, (compiled, graphed)
        self._route = compiled_route(self.as_written_route) if compiled else self.as_written_route
        self._first = compiled
        self.replays = Replays(functools.partial(_plan_outputs, self._route)) if graphed else None

    @classmethod
    def on(cls, device, compile_model, graph_stages=False, reference=REFERENCE):
        """The reference for a run on ``device``: compiled and graphed where asked and the device is a GPU."""
        cuda = device.type == "cuda"
        return cls(compiled=compile_model and cuda, graphed=graph_stages and cuda, reference=reference)

    def like(self, reference):
        """Another reference in this one's forms (compiled, graphed) as asked of this one."""
        return type(self)(compiled=self._asked[0], graphed=self._asked[1], reference=reference)

    @property
    def graphed(self):
        return self.replays is not None and self.replays.not_graphed is None

    @property
    def as_written(self):
        """Whether it runs the model's source as written, neither compiled nor graphed."""
        return not self.compiled and not self.graphed

    def run(self, batch, reference=None):
        graphed = self.replays is not None and batch.plan.problems >= EAGER_BELOW
        if self._first:  # compiles now, outside any capture
            self._first = False
            try:
                first = run_model(batch, self._route)
                if not graphed:
                    return first
            except Exception as exc:  # whatever stops the compiler, the model still runs, as written
                self.compiled, self._route = False, self.as_written_route
                if self.replays is not None:
                    self.replays = Replays(functools.partial(_plan_outputs, self.as_written_route))
                self.not_compiled = f"torch.compile raised {type(exc).__name__}: " \
                                    f"{str(exc).strip().splitlines()[0][:200]}"
        if not graphed:
            return run_model(batch, self._route)
        return BatchOutputs(*self.replays.run(batch.plan, batch.logits, batch.bias, batch.scale, batch.renormalize,
                                              batch.offset, batch.count))

    def describe(self):
        """"compiled", "graphed", both, or "as written", with the reasons where compiling or capturing failed."""
        forms = [form for form, used in (("compiled", self.compiled), ("graphed", self.graphed)) if used]
        failed = [why for why in (self.not_compiled, self.replays and self.replays.not_graphed) if why]
        return (", ".join(forms) or "as written") + (f" ({'; '.join(failed)})" if failed else "")
