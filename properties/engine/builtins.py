"""The harness's own implementations, each the interface of properties/engine/interface.py (an adapter where
its own call differs) with its declaration.

- "model": the NumPy bitwise model (every machine; on CUDA tensors the same source through torch).
- "flashinfer_fused": the model of FlashInfer's fused routing (oracles/numpy_model/flashinfer_fused.py), the
  reference of implementations that declare it (properties/engine/references.py); run only where one does.
- "triton": the Triton oracle ``fused_musespark1x_routing`` (CUDA): ids and weights.
- "cute": the CuTe DSL kernel ``kernel.routing.route`` (CUDA): ids, weights and metadata.
- "flashinfer": FlashInfer's routingIndicesDynBlockKernel on the reference's ids (CUDA): metadata only.
- "fault-ties_to_highest_index", "fault-writes_the_guard": the planted faults, the model with ties won by the
  highest index and the model writing the metadata guard; they run only where named (the soak's ``--fault
  NAME``, replay's ``--impl``, a test's names) and show that a disagreement is caught, saved and replayed.
"""

import importlib
from functools import lru_cache

import torch

import oracles.numpy_model as model
from oracles.numpy_model import flashinfer_fused
from kernel.layout import EXPERTS, metadata_size
from properties.engine.interface import Declaration, Implementation
from properties.engine.poison import METADATA_POISON

FAULT_PREFIX = "fault-"
ALL_FIELDS = ("ids", "weights", "metadata")


def _host(x):
    """A CPU tensor as the NumPy array sharing its memory (the model's NumPy path); a CUDA tensor as is."""
    return x.numpy() if x.device.type == "cpu" else x


def _tensor(value):
    """A model output (a NumPy array from CPU inputs, a tensor from CUDA ones) as a tensor."""
    return value if isinstance(value, torch.Tensor) else torch.from_numpy(value)


def _write(out, value):
    out.copy_(_tensor(value))


def _write_model_metadata(ids, metadata, local_expert_offset, num_local_experts, tile_n):
    if metadata is not None:
        _write(metadata, model.routing_metadata(_host(ids), local_expert_offset, num_local_experts, tile_n,
                                                fill=METADATA_POISON))


def route_model(logits, bias, ids, weights, scale, renormalize=True, metadata=None, local_expert_offset=0,
                num_local_experts=0, tile_n=0):
    """The model (oracles/numpy_model) through the interface."""
    got_ids, got_weights = model.route(_host(logits), _host(bias), scale, renormalize)
    _write(ids, got_ids)
    _write(weights, got_weights)
    _write_model_metadata(ids, metadata, local_expert_offset, num_local_experts, tile_n)


def route_flashinfer_fused_model(logits, bias, ids, weights, scale, renormalize=True, metadata=None,
                                 local_expert_offset=0, num_local_experts=0, tile_n=0):
    """The model of FlashInfer's fused routing through the interface (it always renormalizes)."""
    got_ids, got_weights = flashinfer_fused.route_flashinfer_fused(_host(logits), _host(bias), scale, renormalize)
    _write(ids, got_ids)
    _write(weights, got_weights)
    _write_model_metadata(ids, metadata, local_expert_offset, num_local_experts, tile_n)


def route_ties_to_highest_index(logits, bias, ids, weights, scale, renormalize=True, metadata=None,
                                local_expert_offset=0, num_local_experts=0, tile_n=0):
    """The model on the experts in reverse order, its ids mapped back: among equal values the highest index
    wins."""
    mirrored, got_weights = model.route(_host(logits.flip(-1).contiguous()), _host(bias.flip(-1).contiguous()),
                                        scale, renormalize)
    _write(ids, EXPERTS - 1 - _tensor(mirrored))
    _write(weights, got_weights)
    _write_model_metadata(ids, metadata, local_expert_offset, num_local_experts, tile_n)


def route_writes_the_guard(logits, bias, ids, weights, scale, renormalize=True, metadata=None,
                           local_expert_offset=0, num_local_experts=0, tile_n=0):
    """The model, with the metadata guard written (0) where every expert is local."""
    route_model(logits, bias, ids, weights, scale, renormalize, metadata, local_expert_offset, num_local_experts,
                tile_n)
    if metadata is not None and num_local_experts == EXPERTS:
        metadata[metadata_size(tile_n) - 1] = 0


def route_triton(logits, bias, ids, weights, scale, renormalize=True, metadata=None, local_expert_offset=0,
                 num_local_experts=0, tile_n=0):
    """The Triton oracle into the given ids and weights."""
    from oracles.triton_routing import fused_musespark1x_routing

    fused_musespark1x_routing(logits, bias, renormalize=renormalize, routed_scaling_factor=float(scale),
                              out_weights=weights, out_ids=ids)


def route_cute(*args, **kwargs):
    """The CuTe kernel, looked up at each call (a CPU test replaces ``kernel.routing.route``)."""
    from kernel import routing

    routing.route(*args, **kwargs)


def _prepare_cute(renormalize):
    from kernel import routing

    routing.prepare(renormalize)


def route_flashinfer(logits, bias, ids, weights, scale, renormalize=True, metadata=None, local_expert_offset=0,
                     num_local_experts=0, tile_n=0):
    """FlashInfer's dyn-block kernel on ``ids`` (the reference's), writing its outputs straight into
    ``metadata``'s slots where to_meta lays them; ``metadata`` starts poisoned, as to_meta fills what FlashInfer
    does not write. One launch a call, capturable."""
    from oracles.flashinfer_routing import enqueue

    enqueue.enqueue(enqueue.buffers_in_meta(ids, metadata, tile_n), local_expert_offset, num_local_experts)


def _probe(load):
    """None when ``load()`` succeeds, else why not."""
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


_MODEL_LIKE = dict(writes=ALL_FIELDS, capturable=False)
_FAULT = dict(on_request=True, **_MODEL_LIKE)
BUILTINS = (
    Implementation("model", route_model, Declaration(device="cpu", **_MODEL_LIKE)),
    Implementation("flashinfer_fused", route_flashinfer_fused_model,
                   Declaration(device="cpu", renormalize=(True,), on_request=True, **_MODEL_LIKE)),
    Implementation("triton", route_triton, Declaration(device="cuda", unavailable=_triton_reason)),
    Implementation("cute", route_cute, Declaration(writes=ALL_FIELDS, device="cuda", unavailable=_cute_reason,
                                                   prepare=_prepare_cute)),
    Implementation("flashinfer", route_flashinfer, Declaration(writes=("metadata",), reads_ids=True, device="cuda",
                                                               unavailable=_flashinfer_reason)),
    Implementation(FAULT_PREFIX + "ties_to_highest_index", route_ties_to_highest_index, Declaration(**_FAULT)),
    Implementation(FAULT_PREFIX + "writes_the_guard", route_writes_the_guard, Declaration(**_FAULT)),
)
