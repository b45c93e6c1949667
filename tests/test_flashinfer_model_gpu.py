"""FlashInfer's fused routing library (libfi_fused_routing.so, both kernels its dispatch launches) against its
model (oracles/numpy_model/flashinfer_fused.py), bit for bit: ids, weights and metadata, b = 1..8, on the
bench's inputs and on Hypothesis-drawn rows of every edge-case generator; and the model on CUDA tensors (the
soak's form, as written and compiled) against its NumPy form."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings

from kernel.layout import EXPERTS, MAX_TOKENS
from oracles.flashinfer_routing import DEFAULT_POISON, fused_peer, to_meta
from oracles.numpy_model import routing_metadata
from oracles.numpy_model import flashinfer_fused as fi
from properties.bench.problem import SCALE, inputs
from properties.inputs.strategies import GENERATORS
from properties.soak.impls import compiled_route

pytestmark = pytest.mark.gpu
TILE = 8


def _library(logits, bias, scale):
    """(kernel launched, ids, weights, metadata) of the library on the GPU over every expert, tile TILE."""
    buffers = fused_peer.peer_buffers(torch.from_numpy(logits).cuda(), torch.from_numpy(bias).cuda(), TILE)
    kernel = fused_peer.enqueue(buffers, scale, 0, EXPERTS)
    torch.cuda.synchronize()
    return kernel, fused_peer.read_back(buffers)


def _assert_equal(logits, bias, scale):
    kernel, got = _library(logits, bias, scale)
    assert kernel == fused_peer.expected_kernel(logits.shape[0])
    ids, weights = fi.route_flashinfer_fused(logits, bias, scale)
    np.testing.assert_array_equal(got.ids, ids)
    differs = np.flatnonzero(got.weights.view(np.uint32) != weights.view(np.uint32))
    assert differs.size == 0, (f"{kernel}: {differs.size} weight(s) differ, first at {differs[0]}: "
                               f"0x{got.weights.reshape(-1)[differs[0]].view(np.uint32):08x} instead of "
                               f"0x{weights.reshape(-1)[differs[0]].view(np.uint32):08x}")
    want = routing_metadata(ids, 0, EXPERTS, TILE, fill=DEFAULT_POISON)
    np.testing.assert_array_equal(to_meta(got.metadata), want)


@pytest.mark.parametrize("b", range(1, MAX_TOKENS + 1))
def test_the_library_equals_its_model_on_the_bench_inputs(fused_peer_library, b):
    logits, bias = inputs(b)
    _assert_equal(logits, bias, float(SCALE))


@pytest.mark.parametrize("generator", sorted(GENERATORS))
def test_the_library_equals_its_model_on_every_generator(fused_peer_library, generator):
    """Each drawn case at its own b (1..8) and scale; FlashInfer always renormalizes, whatever it asks."""
    @settings(deadline=None)
    @given(case=GENERATORS[generator])
    def check(case):
        _assert_equal(np.ascontiguousarray(case.logits), np.ascontiguousarray(case.bias), float(case.scale))

    check()


@pytest.mark.parametrize("compiled", [False, True])
def test_the_model_on_cuda_tensors_equals_its_numpy_form(compiled):
    rng = np.random.default_rng(11)
    logits = (rng.standard_normal((4096, EXPERTS)) * 12).astype(np.float32)
    logits[::7, ::5] = rng.choice(np.array([0.0, -0.0, np.inf, -np.inf, 18.02, -18.02, 1e-40], np.float32),
                                  logits[::7, ::5].shape)
    bias = (rng.standard_normal((4096, EXPERTS)) * 0.01).astype(np.float32)
    scale = rng.uniform(0.5, 3, 4096).astype(np.float32)
    route = compiled_route(fi.route_rows) if compiled else fi.route_rows
    got_ids, got_weights = route(*(torch.from_numpy(x).cuda() for x in (logits, bias, scale)), True)
    with np.errstate(all="ignore"):
        ids, weights = fi.route_rows(logits, bias, scale, True)
    np.testing.assert_array_equal(got_ids.cpu().numpy(), ids)
    np.testing.assert_array_equal(got_weights.cpu().numpy().view(np.uint32), weights.view(np.uint32))
