"""Test plug-ins on the CPU: FlashInfer's fused routing model through the interface, declared against its own
reference (``route``) and against the Muse Spark model (``route_against_the_model``), the same outputs."""

import torch

from oracles.numpy_model.flashinfer_fused import route_flashinfer_fused


def route(logits, bias, ids, weights, scale, renormalize=True, metadata=None, local_expert_offset=0,
          num_local_experts=0, tile_n=0):
    got_ids, got_weights = route_flashinfer_fused(logits.numpy(), bias.numpy(), scale, renormalize)
    ids.copy_(torch.from_numpy(got_ids))
    weights.copy_(torch.from_numpy(got_weights))


def route_against_the_model(*args, **kwargs):
    route(*args, **kwargs)


route.declaration = {"device": "cpu", "renormalize": (True,), "reference": "flashinfer_fused"}
route_against_the_model.declaration = {"device": "cpu", "renormalize": (True,)}
