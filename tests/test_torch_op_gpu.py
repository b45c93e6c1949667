"""route as a torch op on the GPU (kernel/op.py), every output against the NumPy model bit for bit through the
engine's poisoned buffers: ``torch.library.opcheck`` at every b with and without metadata; a decode step (the
router's GEMV in FP32, then the op) under ``torch.compile(fullgraph=True)`` with no graph break, and under
``mode="reduce-overhead"`` (CUDA graphs) after ``prepare()``, each compared with the model fed the logits the
compiled GEMV produced; beside them, what the plain ``route`` does under torch.compile (it breaks the graph, and
fullgraph refuses it), recorded in the test's properties (reports/junit.xml)."""

import numpy as np
import pytest
import torch

import kernel.op  # noqa: F401  (registers torch.ops.musespark.route)
from kernel import routing
from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS, TOP_K, metadata_size
from properties.engine import device
from properties.engine.poison import IDS_POISON, METADATA_POISON, METADATA_SLACK, WEIGHT_POISON_BITS
from properties.inputs.families import batches, families

from helpers import case_of

pytestmark = pytest.mark.gpu

OP = torch.ops.musespark.route
FAMILIES = families()
SCALE = 2.5
HIDDEN = 1024  # the decode step's hidden size
# (tile_n, local_expert_offset, num_local_experts) with metadata at each b: the b = 1 and b = 2 kernels' tiles
# among them, local ranges from all experts to a slice.
REQUESTS = {1: (1, 0, EXPERTS), 2: (2, 64, 64), 3: (3, 0, EXPERTS), 4: (TOP_K, 7, 13), 5: (16, 0, EXPERTS),
            6: (100, 200, 56), 7: (MAX_TILE, 0, EXPERTS), 8: (TOP_K, 0, 32)}
DECODE = {"plain": (None, 0, 0), "metadata": (TOP_K, 0, EXPERTS)}


@pytest.fixture(scope="module", autouse=True)
def prepared():
    for renormalize in (True, False):
        routing.prepare(renormalize)


def separate(buffers):
    """route's arguments for the engine's buffers, each tensor copied to an allocation of its own (opcheck and
    AOTAutograd take tensors of one storage for aliases), the outputs still poisoned."""
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in device.route_args(buffers))


def written_back(buffers, ids, weights, metadata):
    """Copy outputs into the buffers' (ids and weights of b rows; metadata whole, slack included); the lines of
    every disagreement of the whole buffers with the model (none when every bit is equal)."""
    buffers.ids.copy_(ids)
    buffers.weights.copy_(weights)
    if metadata is not None:
        buffers.metadata_all.copy_(metadata)
    device.synchronize()
    return buffers.mismatches()


def family_case(b, renormalize, request):
    """The first batch of b rows of one adversarial family (a different one for each b)."""
    family = FAMILIES[b % len(FAMILIES)]
    return case_of(f"{family.name} b={b}", batches(family.rows, b)[0], family.bias, SCALE, renormalize, request)


@pytest.mark.parametrize("with_metadata", (False, True), ids=("plain", "metadata"))
@pytest.mark.parametrize("b", range(1, MAX_TOKENS + 1))
def test_opcheck_passes_and_the_op_writes_the_models_bits(b, with_metadata):
    case = family_case(b, b % 2 == 1, REQUESTS[b] if with_metadata else (None, 0, 0))
    buffers = device.buffers(case)
    result = torch.library.opcheck(OP.default, separate(buffers))
    assert len(result) == 4 and set(result.values()) == {"SUCCESS"}, result
    args = separate(buffers)
    assert OP(*args) is None
    lines = written_back(buffers, args[2], args[3], args[6] if with_metadata else None)
    assert not lines, device.report(case, lines)


def decode_step(route, renormalize, request):
    """A decode step's routing: the router's GEMV (hidden [b, HIDDEN] @ weight.T, FP32), then ``route`` into
    poisoned outputs made in the step; returns the logits the GEMV produced and the outputs (metadata with
    METADATA_SLACK poisoned elements past metadata_size(tile_n), or None)."""
    tile_n, offset, count = request

    def step(hidden, router_weight, bias):
        logits = hidden @ router_weight.T
        b = hidden.shape[0]
        ids = torch.full((b, TOP_K), IDS_POISON, dtype=torch.int32, device=hidden.device)
        weights = torch.full((b, TOP_K), WEIGHT_POISON_BITS, dtype=torch.int32, device=hidden.device).view(
            torch.float32)
        if tile_n is None:
            route(logits, bias, ids, weights, SCALE, renormalize)
            return logits, ids, weights, None
        metadata = torch.full((metadata_size(tile_n) + METADATA_SLACK,), METADATA_POISON, dtype=torch.int32,
                              device=hidden.device)
        route(logits, bias, ids, weights, SCALE, renormalize, metadata, offset, count, tile_n)
        return logits, ids, weights, metadata

    return step


def step_inputs(b, seed):
    """hidden [b, HIDDEN], the router's weight [256, HIDDEN] and the bias [256], FP32 on the GPU."""
    rng = np.random.default_rng(seed)
    draw = lambda shape, sd: torch.from_numpy(rng.normal(0, sd, shape).astype(np.float32)).cuda()  # noqa: E731
    return draw((b, HIDDEN), 1.0), draw((EXPERTS, HIDDEN), HIDDEN ** -0.5), draw((EXPERTS,), 0.5)


def assert_models_bits(outputs, bias, renormalize, request, label):
    """The step's outputs equal the model's on the logits the step's GEMV produced, bit for bit."""
    logits, ids, weights, metadata = outputs
    case = case_of(label, logits.cpu().numpy(), bias.cpu().numpy(), SCALE, renormalize, request)
    buffers = device.buffers(case)
    lines = written_back(buffers, ids, weights, metadata)
    assert not lines, device.report(case, lines)


@pytest.mark.long
@pytest.mark.parametrize("decode", sorted(DECODE))
def test_a_decode_step_compiles_whole_and_gives_the_models_bits(decode):
    """torch.compile(fullgraph=True) of the GEMV and the op (renormalized), every b in turn (b = 1 compiled on its
    own, then one graph for a dynamic b): no graph break, and the model's bits at every b."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(decode_step(OP, True, DECODE[decode]), fullgraph=True)
    for b in range(1, MAX_TOKENS + 1):
        hidden, router_weight, bias = step_inputs(b, b)
        assert_models_bits(compiled(hidden, router_weight, bias), bias, True, DECODE[decode],
                           f"compiled decode step b={b}")
    assert sum(torch._dynamo.utils.counters["graph_break"].values()) == 0, \
        dict(torch._dynamo.utils.counters["graph_break"])


@pytest.mark.long
@pytest.mark.parametrize("decode", sorted(DECODE))
def test_a_decode_step_under_cuda_graphs_replays_with_the_models_bits(decode, monkeypatch):
    """mode="reduce-overhead" after prepare() (scaled, not renormalized): no CUDA graph skipped, the op launched
    while a graph is captured, and the third call of each b (a replay) launches nothing from Python yet gives the
    model's bits on new inputs, as every call does."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    launches, stream = [], routing.current_stream
    monkeypatch.setattr(routing, "current_stream",
                        lambda index: (launches.append(torch.cuda.is_current_stream_capturing()), stream(index))[1])
    compiled = torch.compile(decode_step(OP, False, DECODE[decode]), mode="reduce-overhead", fullgraph=True)
    replayed = []
    for b in range(1, MAX_TOKENS + 1):
        for call in range(3):
            hidden, router_weight, bias = step_inputs(b, 100 * b + call)
            before = len(launches)
            torch.compiler.cudagraph_mark_step_begin()
            outputs = compiled(hidden, router_weight, bias)
            assert_models_bits(tuple(None if t is None else t.clone() for t in outputs), bias, False,
                               DECODE[decode], f"graphed decode step b={b} call {call}")
        replayed.append(len(launches) == before)
    assert torch._dynamo.utils.counters["inductor"]["cudagraph_skips"] == 0, dict(torch._dynamo.utils.counters)
    assert any(launches), "no launch of the op was captured in a CUDA graph"
    assert all(replayed), f"the third call of b in {[b for b, r in enumerate(replayed, 1) if not r]} launched the op"


def test_the_op_has_no_graph_break_where_plain_route_breaks_the_graph(record_property):
    """What torch.compile does with each: the step calling ``kernel.routing.route`` (data pointers, an FFI call)
    breaks the graph at least once and fullgraph=True refuses it; the step calling the op is one graph. The
    route step's break reasons are recorded as the test's property ``route_graph_breaks``."""
    hidden, router_weight, bias = step_inputs(MAX_TOKENS, 0)
    plain = decode_step(routing.route, True, DECODE["metadata"])
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.TorchDynamoException) as refused:
        torch.compile(plain, fullgraph=True)(hidden, router_weight, bias)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(plain)(hidden, router_weight, bias)
    reasons = [str(r.reason).splitlines()[0] for r in explained.break_reasons]
    record_property("route_graph_breaks", {"fullgraph": f"{type(refused.value).__name__}: "
                                                        f"{str(refused.value).splitlines()[0]}",
                                           "graph_breaks": explained.graph_break_count,
                                           "graphs": explained.graph_count, "reasons": reasons})
    assert explained.graph_break_count >= 1, reasons
    torch._dynamo.reset()
    explained = torch._dynamo.explain(decode_step(OP, True, DECODE["metadata"]))(hidden, router_weight, bias)
    assert (explained.graph_break_count, explained.graph_count) == (0, 1), \
        [str(r.reason) for r in explained.break_reasons]
