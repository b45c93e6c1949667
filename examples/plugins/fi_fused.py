"""FlashInfer's fused routing from logits (routingCustom::run, the benchmark's peer: libfi_fused_routing.so,
oracles/flashinfer_routing/fused_peer.py) as a plug-in of the harness, written as a user's module would be:
ids (FlashInfer writes int16), FP32 weights and, when asked, the metadata, in one launch on the current
stream, into the tensors it is given (its own buffers, allocated and poisoned in the call, so the call can be
captured into a CUDA graph).

    python -m properties.soak --impl fi_fused=examples/plugins/fi_fused.py:route --rows 1e8

FlashInfer's routing runner always renormalizes and takes power-of-two tiles and at least one local expert:
the declaration says so, and the harness calls it on nothing else. Its reference is the model of its own
arithmetic (oracles/numpy_model/flashinfer_fused.py), not the Muse Spark model, whose sigmoid it does not
compute.
"""

from dataclasses import replace

from kernel.layout import EXPERTS, MAX_TILE
from oracles.flashinfer_routing import fused_peer
from oracles.flashinfer_routing.dyn_block import place_in_meta

_PLAIN_TILE = 8  # the tile of a call that asks for no metadata (FlashInfer computes it anyway; it is dropped)


def _unavailable():
    try:
        fused_peer.load_library()
    except Exception as exc:  # any failure to build or load the library: the reason
        return f"{type(exc).__name__}: {exc}"
    return None


def route(logits, bias, ids, weights, scale, renormalize=True, metadata=None, local_expert_offset=0,
          num_local_experts=0, tile_n=0):
    tile = tile_n if metadata is not None else _PLAIN_TILE
    buffers = replace(fused_peer.peer_buffers(logits, bias, tile), weights=weights)
    if metadata is None:
        fused_peer.enqueue(buffers, scale, 0, EXPERTS)
    else:
        fused_peer.enqueue(buffers, scale, local_expert_offset, num_local_experts)
        place_in_meta(metadata, buffers.scalars[0], buffers.scalars[1], buffers.expanded_to_permuted,
                      buffers.cta_batch, buffers.cta_limit, buffers.permuted_to_token, tile_n)
    ids.copy_(buffers.ids)


route.declaration = {
    "writes": ("ids", "weights", "metadata"),
    "tiles": tuple(2**k for k in range(MAX_TILE.bit_length()) if 2**k <= MAX_TILE),
    "min_local_experts": 1,
    "renormalize": (True,),
    "device": "cuda",
    "unavailable": _unavailable,
    "reference": "flashinfer_fused",
}
