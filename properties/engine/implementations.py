"""Every routing implementation, each run as case -> Outputs, with the reason it cannot run on this machine.

- "model": the NumPy bitwise model (every machine).
- "triton": the Triton oracle ``fused_musespark1x_routing`` (CUDA): ids and weights.
- "cute": the CuTe DSL kernel ``kernel.routing.route`` (CUDA): ids, weights and metadata.
- "flashinfer": FlashInfer's routingIndicesDynBlockKernel on the model's ids (CUDA): metadata only.
- "broken": the model with ties won by the highest index, a deliberate bug that exists only while the
  environment sets ROUTING_INJECT_BROKEN=1; it shows that a disagreement is caught, saved and replayed.

Every output buffer an implementation writes into starts poisoned (properties/engine/poison.py), so an element
it leaves untouched is compared too.
"""

import importlib
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np

import oracles.numpy_model as model
from kernel.layout import EXPERTS, TOP_K
from oracles.provenance import cuda_reason
from properties.engine.cases import Outputs
from properties.engine.poison import IDS_POISON, METADATA_POISON, WEIGHT_POISON_BITS

BROKEN_ENV = "ROUTING_INJECT_BROKEN"
REFERENCE = "model"
# The implementations a GPU machine must run; "broken" is never required.
REAL = ("model", "triton", "cute", "flashinfer")


def _model_metadata(case, ids):
    if not case.has_metadata:
        return None
    return model.routing_metadata(ids, case.local_expert_offset, case.num_local_experts, case.tile_n,
                                  fill=METADATA_POISON)


def _run_model(case):
    ids, weights = model.route(case.logits, case.bias, case.scale, case.renormalize)
    return Outputs(ids, weights, _model_metadata(case, ids))


def _run_broken(case):
    """The model on the experts in reverse order, its ids mapped back: among equal values the highest
    index wins."""
    mirrored, weights = model.route(np.ascontiguousarray(case.logits[:, ::-1]),
                                    np.ascontiguousarray(case.bias[::-1]), case.scale, case.renormalize)
    ids = (EXPERTS - 1 - mirrored).astype(np.int32)
    return Outputs(ids, weights, _model_metadata(case, ids))


def _run_triton(case):
    import torch

    from oracles.triton_routing import fused_musespark1x_routing

    device = torch.device("cuda", torch.cuda.current_device())
    ids = torch.full((case.b, TOP_K), IDS_POISON, dtype=torch.int32, device=device)
    weights = torch.full((case.b, TOP_K), WEIGHT_POISON_BITS, dtype=torch.int32, device=device).view(torch.float32)
    fused_musespark1x_routing(torch.from_numpy(case.logits).to(device), torch.from_numpy(case.bias).to(device),
                              renormalize=case.renormalize, routed_scaling_factor=float(case.scale),
                              out_weights=weights, out_ids=ids)
    torch.cuda.synchronize()
    return Outputs(ids.cpu().numpy(), weights.cpu().numpy(), None)


def _run_cute(case):
    """The kernel through the harness's poisoned buffers; the outputs its contract covers."""
    from properties.engine import device

    return device.route(case).contract()


def _run_flashinfer(case):
    from oracles.flashinfer_routing import dyn_block_metadata, to_meta

    if not case.has_metadata:
        return Outputs(None, None, None)
    ids, _ = model.route(case.logits, case.bias, case.scale, case.renormalize)
    result = dyn_block_metadata(ids, case.local_expert_offset, case.num_local_experts, case.tile_n,
                                poison=METADATA_POISON)
    return Outputs(None, None, to_meta(result))


def _probe(load):
    """None when CUDA exists and ``load()`` succeeds, else why not."""
    reason = cuda_reason()
    if reason is not None:
        return reason
    try:
        load()
    except Exception as exc:  # any failure to import or build makes the implementation unavailable
        return f"{type(exc).__name__}: {exc}"
    return None


@lru_cache(maxsize=None)
def _triton_reason():
    return _probe(lambda: importlib.import_module("oracles.triton_routing"))


@lru_cache(maxsize=None)
def _cute_reason():
    return _probe(lambda: importlib.import_module("kernel.routing"))


@lru_cache(maxsize=None)
def _flashinfer_reason():
    def load():
        from oracles.flashinfer_routing import load_library
        load_library()
    return _probe(load)


def _broken_reason():
    if os.environ.get(BROKEN_ENV) == "1":
        return None
    return f"a deliberate bug, injected only with {BROKEN_ENV}=1"


@dataclass(frozen=True)
class Implementation:
    """``run(case) -> Outputs``; ``unavailable()`` is None where it runs, else the reason."""

    name: str
    run: Callable
    unavailable: Callable
    writes: tuple  # the Outputs fields it fills (metadata only when the case sets a tile)


REGISTRY = {impl.name: impl for impl in (
    Implementation("model", _run_model, lambda: None, ("ids", "weights", "metadata")),
    Implementation("triton", _run_triton, _triton_reason, ("ids", "weights")),
    Implementation("cute", _run_cute, _cute_reason, ("ids", "weights", "metadata")),
    Implementation("flashinfer", _run_flashinfer, _flashinfer_reason, ("metadata",)),
    Implementation("broken", _run_broken, _broken_reason, ("ids", "weights", "metadata")),
)}


def available():
    """Names of the implementations that run on this machine, in registry order."""
    return [name for name, impl in REGISTRY.items() if impl.unavailable() is None]


def unavailable():
    """name -> why it cannot run here, for every implementation that cannot."""
    return {name: reason for name, impl in REGISTRY.items() if (reason := impl.unavailable()) is not None}


def failed_on_gpu():
    """On a CUDA machine: name -> why, for each real implementation whose import or probe failed (the gate
    lists them as not run, so a differential check never silently compares the model with itself). Empty
    on a machine without CUDA, where none of them is expected to run."""
    if cuda_reason() is not None:
        return {}
    return {name: why for name, why in unavailable().items() if name in REAL}


def run_all(case, names=None):
    """name -> Outputs of each implementation in ``names`` (default: every available one) on ``case``."""
    return {name: REGISTRY[name].run(case) for name in (available() if names is None else names)}
