"""FlashInfer's fused routing from logits (the benchmark's peer) on the GPU, b = 1..8 on the bench's inputs:
the kernel FlashInfer's dispatch launches, its ids against the NumPy model's and its metadata against the
dyn-block oracle fed those ids, bit for bit, every META element (both sides start from the same poison).
Its weights are not compared (its sigmoid goes through tanh): the bench records how far they are."""

import numpy as np
import pytest
import torch

from kernel.layout import EXPERTS, MAX_TOKENS
from oracles.flashinfer_routing import DEFAULT_POISON, dyn_block_metadata, to_meta
from oracles.flashinfer_routing import fused_peer
from oracles.numpy_model import route
from properties.bench.problem import SCALE, inputs

pytestmark = pytest.mark.gpu

# (local_expert_offset, num_local_experts, tile_n): the bench's default, a rank of four, the tile of one.
REQUESTS = ((0, EXPERTS, 8), (64, 64, 4), (0, EXPERTS, 1))


def _run(b, offset, count, tile, use_pdl):
    logits, bias = inputs(b)
    buffers = fused_peer.peer_buffers(torch.from_numpy(logits).cuda(), torch.from_numpy(bias).cuda(), tile)
    kernel = fused_peer.enqueue(buffers, SCALE, offset, count, use_pdl=use_pdl)
    torch.cuda.synchronize()
    return kernel, fused_peer.read_back(buffers), route(logits, bias, SCALE, True)


@pytest.mark.parametrize("b", range(1, MAX_TOKENS + 1))
@pytest.mark.parametrize("offset, count, tile", REQUESTS)
def test_peer_ids_equal_the_model_and_metadata_the_oracle(b, offset, count, tile):
    kernel, peer, (ids, weights) = _run(b, offset, count, tile, use_pdl=True)
    assert kernel == fused_peer.expected_kernel(b)
    np.testing.assert_array_equal(peer.ids, ids)
    oracle = dyn_block_metadata(ids, offset, count, tile, poison=DEFAULT_POISON)
    np.testing.assert_array_equal(to_meta(peer.metadata), to_meta(oracle))
    assert peer.weights.shape == weights.shape and np.isfinite(peer.weights).all()


@pytest.mark.parametrize("b", (1, 8))
def test_without_pdl_the_outputs_are_the_same(b):
    with_pdl = _run(b, 0, EXPERTS, 8, use_pdl=True)[1]
    without = _run(b, 0, EXPERTS, 8, use_pdl=False)[1]
    np.testing.assert_array_equal(without.ids, with_pdl.ids)
    np.testing.assert_array_equal(without.weights.view(np.int32), with_pdl.weights.view(np.int32))
    np.testing.assert_array_equal(to_meta(without.metadata), to_meta(with_pdl.metadata))


def test_a_captured_graph_replays_the_peer():
    logits, bias = inputs(8)
    buffers = fused_peer.peer_buffers(torch.from_numpy(logits).cuda(), torch.from_numpy(bias).cuda(), 8)
    fused_peer.enqueue(buffers, SCALE, 0, EXPERTS)
    torch.cuda.synchronize()
    first = fused_peer.read_back(buffers)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fused_peer.enqueue(buffers, SCALE, 0, EXPERTS)
    buffers.poison()
    graph.replay()
    torch.cuda.synchronize()
    again = fused_peer.read_back(buffers)
    np.testing.assert_array_equal(again.ids, first.ids)
    np.testing.assert_array_equal(again.weights.view(np.int32), first.weights.view(np.int32))
    np.testing.assert_array_equal(to_meta(again.metadata), to_meta(first.metadata))
