"""The Triton oracle on the GPU, bit for bit against the NumPy model, and the same under CUDA graph replay.

Inputs: properties/inputs/families.py (14 families of fixed-seed adversarial rows). Equality is exact (the engine's
bitwise comparison, properties/engine/compare.py): ids equal and weight bit patterns equal.
"""

import numpy as np
import pytest
import torch

from kernel.layout import EXPERTS, TOP_K
from oracles.ptx.float_ops import float_ops
from oracles.ptx.reader import instructions
from oracles.triton_codegen import compile_ptx
from oracles.triton_routing import fused_musespark1x_routing, launch
from properties.engine.cases import Outputs
from properties.engine.compare import describe, disagreements
from properties.engine.floats import f32
from properties.inputs.families import batches, families, pooled_rows

pytestmark = pytest.mark.gpu

DEVICE = "cuda"
SCALES = {
    "1.0": 1.0,
    "2.5": 2.5,
    "0.0": 0.0,
    "subnormal": float(f32(0x00123456)),
    # scale / (total + 1e-15) overflows to inf whenever total < 1; p = 0 then gives inf * 0.
    "max_float32": float(np.finfo(np.float32).max),
}
SMALL_BATCHES = range(1, 9)
LARGE_BATCHES = (9, 256, 4096)
# The scale only enters each row's own arithmetic, which the small batches cover with every scale.
LARGE_BATCH_SCALES = ("2.5", "max_float32")
GRAPH_SCALE = 2.5
FAMILIES = families()


@pytest.fixture(scope="module")
def model_route():
    from oracles.numpy_model import route
    return route


def on_device(array):
    return torch.from_numpy(np.ascontiguousarray(array)).to(DEVICE)


def differing_rows(label, oracle, reference, reference_name="model"):
    """One line per output field whose bits differ (the first elements of each), through the engine's bitwise
    comparison; empty when every bit is equal."""
    (weights, ids), (want_ids, want_weights) = oracle, reference
    want = Outputs(np.asarray(want_ids), np.asarray(want_weights, dtype=np.float32), None)
    found = disagreements({reference_name: want, "triton": Outputs(ids, weights, None)}, reference=reference_name)
    return [f"{label}: {describe(d)}" for d in found]


def route_on_gpu(rows, bias, scale, renormalize):
    """The oracle through its public entry with outputs it allocates; numpy (weights, ids)."""
    weights, ids = fused_musespark1x_routing(on_device(rows), on_device(bias), renormalize=renormalize,
                                             routed_scaling_factor=scale)
    assert weights.dtype == torch.float32 and ids.dtype == torch.int32
    assert weights.shape == ids.shape == (len(rows), TOP_K)
    return weights.cpu().numpy(), ids.cpu().numpy()


def compare_batches(cases, scale, renormalize, route):
    """Every (label, rows, bias) case against the model; returns (rows compared, mismatch lines)."""
    compared, lines = 0, []
    for label, rows, bias in cases:
        oracle = route_on_gpu(rows, bias, scale, renormalize)
        lines += differing_rows(label, oracle, route(rows, bias, scale, renormalize=renormalize))
        compared += len(rows)
    return compared, lines


def small_cases(b):
    return [(f"{f.name} b={b} batch {i}", rows, f.bias)
            for f in FAMILIES for i, rows in enumerate(batches(f.rows, b))]


def large_cases(n):
    return [(f"{f.name} bias, {n} pooled rows", pooled_rows(FAMILIES, n, seed=n), f.bias) for f in FAMILIES]


@pytest.mark.parametrize("scale", sorted(SCALES))
@pytest.mark.parametrize("renormalize", [True, False])
@pytest.mark.parametrize("b", SMALL_BATCHES)
def test_small_batches_match_the_numpy_model(b, renormalize, scale, model_route):
    compared, lines = compare_batches(small_cases(b), SCALES[scale], renormalize, model_route)
    assert compared and not lines, f"{len(lines)} differing fields in {compared} rows:\n" + "\n".join(lines)


@pytest.mark.parametrize("scale", LARGE_BATCH_SCALES)
@pytest.mark.parametrize("renormalize", [True, False])
@pytest.mark.parametrize("n", LARGE_BATCHES)
def test_large_batches_match_the_numpy_model(n, renormalize, scale, model_route):
    compared, lines = compare_batches(large_cases(n), SCALES[scale], renormalize, model_route)
    assert compared and not lines, f"{len(lines)} differing fields in {compared} rows:\n" + "\n".join(lines)


class StaticCall:
    """fused_musespark1x_routing on fixed input and output buffers, as a CUDA graph captures it."""

    def __init__(self, b, renormalize):
        self.logits = torch.zeros(b, EXPERTS, dtype=torch.float32, device=DEVICE)
        self.bias = torch.zeros(EXPERTS, dtype=torch.float32, device=DEVICE)
        self.weights = torch.empty(b, TOP_K, dtype=torch.float32, device=DEVICE)
        self.ids = torch.empty(b, TOP_K, dtype=torch.int32, device=DEVICE)
        self.renormalize = renormalize

    def __call__(self):
        out = fused_musespark1x_routing(self.logits, self.bias, renormalize=self.renormalize,
                                        routed_scaling_factor=GRAPH_SCALE, out_weights=self.weights,
                                        out_ids=self.ids)
        assert out[0] is self.weights and out[1] is self.ids
        return out

    def warm_up(self):
        """Compile and run once on a side stream, as torch requires before capture."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()


def graph_cases(b):
    if b <= TOP_K:
        return small_cases(b)
    return large_cases(b)


@pytest.mark.parametrize("renormalize", [True, False])
@pytest.mark.parametrize("b", [*SMALL_BATCHES, 4096])
def test_graph_replay_equals_eager(b, renormalize):
    call = StaticCall(b, renormalize)
    call.warm_up()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    compared, lines = 0, []
    for label, rows, bias in graph_cases(b):
        call.logits.copy_(on_device(rows))
        call.bias.copy_(on_device(bias))
        call.weights.fill_(float("nan"))
        call.ids.fill_(-1)
        graph.replay()
        torch.cuda.synchronize()
        replayed = (call.weights.cpu().numpy(), call.ids.cpu().numpy())
        eager_weights, eager_ids = route_on_gpu(rows, bias, GRAPH_SCALE, renormalize)
        lines += differing_rows(label, replayed, (eager_ids, eager_weights), "eager")
        compared += len(rows)
    assert compared and not lines, f"replay differs from eager in {len(lines)} fields of {compared} rows:\n" + \
        "\n".join(lines)


def test_capture_with_preallocated_outputs_allocates_nothing():
    call = StaticCall(4, True)
    call.warm_up()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        before = torch.cuda.memory_stats()["allocation.all.allocated"]
        call()
        after = torch.cuda.memory_stats()["allocation.all.allocated"]
    assert after == before, f"the captured call allocated {after - before} blocks"


@pytest.mark.parametrize("renormalize", [True, False])
def test_launched_kernel_is_the_one_checked_on_cpu(renormalize):
    call = StaticCall(1, renormalize)
    kernel = launch(call.logits, call.bias, call.weights, call.ids, GRAPH_SCALE, renormalize)
    launched, ahead_of_time = kernel.asm["ptx"], compile_ptx(renormalize)
    assert [i.opcode for i in instructions(launched)] == [i.opcode for i in instructions(ahead_of_time)]
    assert float_ops(launched) == float_ops(ahead_of_time)


@pytest.mark.parametrize("name", ["logits", "bias"])
def test_nan_is_refused_before_anything_is_written(name):
    call = StaticCall(2, True)
    getattr(call, name).view(-1)[77] = float("nan")
    call.weights.fill_(7.0)
    call.ids.fill_(7)
    with pytest.raises(ValueError, match=f"^{name} must not contain NaN"):
        call()
    assert bool((call.weights == 7.0).all()) and bool((call.ids == 7).all())


def test_bias_on_another_device_is_refused():
    with pytest.raises(ValueError, match="^bias must be on the device of logits"):
        fused_musespark1x_routing(torch.zeros(1, EXPERTS, device=DEVICE), torch.zeros(EXPERTS))


def test_an_empty_batch_gives_empty_outputs():
    weights, ids = fused_musespark1x_routing(torch.zeros(0, EXPERTS, device=DEVICE),
                                             torch.zeros(EXPERTS, device=DEVICE))
    assert weights.shape == ids.shape == (0, TOP_K) and ids.dtype == torch.int32
