"""The routing kernel on the GPU against the NumPy model, bit for bit.

Outputs and metadata are poisoned before every call, in buffers larger than the contract's, so a write past
the last token row, past metadata_size(tile) or into an element the kernel must leave (the guard, the
unused fields) shows. About a minute on an H200.
"""

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from kernel import check, routing
from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS

pytestmark = pytest.mark.gpu


SCALE = 2.5
FEW_TILES = (1, 2, 3, 4, 7, 8, 16, 100, 255, 256)


@pytest.fixture(scope="module", autouse=True)
def prepared():
    for renormalize in (True, False):
        routing.prepare(renormalize)


def assert_case(kind, seed, b, renormalize, local, scale=SCALE, row_stride=EXPERTS):
    logits, bias = check.make_inputs(kind, b, seed)
    lines = check.run_case(logits, bias, scale, renormalize, local, row_stride=row_stride)
    assert not lines, check.describe(kind, seed, b, scale, renormalize, local, lines)


@pytest.mark.parametrize("renormalize", (True, False))
@pytest.mark.parametrize("b", range(1, MAX_TOKENS + 1))
def test_ids_and_weights_match_the_model(b, renormalize):
    for kind in check.KINDS:
        for seed in range(3):
            assert_case(kind, 1000 * b + seed, b, renormalize, None)


@pytest.mark.parametrize("scale", (1.0, 0.1, 1e-30, 3e38, -2.0, 0.0))
def test_scales(scale):
    for renormalize in (True, False):
        assert_case("normal", 7, 5, renormalize, None, scale=scale)


@pytest.mark.parametrize("b", (1, 3, MAX_TOKENS))
def test_metadata_every_tile(b):
    """Every tile 1..256; the local range alternates between all experts and a random one."""
    rng = np.random.default_rng(b)
    for tile in range(1, MAX_TILE + 1):
        offset = int(rng.integers(0, EXPERTS))
        local = check.Local(0, EXPERTS, tile) if tile % 2 else \
            check.Local(offset, int(rng.integers(0, EXPERTS - offset + 1)), tile)
        kind = list(check.KINDS)[tile % len(check.KINDS)]
        assert_case(kind, tile, b, tile % 3 != 0, local)


def local_ranges(ids, rng):
    """All experts, none of the picked ones, one picked expert, the last experts, random, empty."""
    picked = int(ids[0, 0])
    offset = int(rng.integers(0, EXPERTS))
    return [(0, EXPERTS), check.unpicked_range(ids), (picked, 1), (EXPERTS - 16, 16),
            (offset, int(rng.integers(0, EXPERTS - offset + 1))), (EXPERTS, 0), (40, 0)]


@pytest.mark.parametrize("b", range(1, MAX_TOKENS + 1))
def test_metadata_local_ranges(b):
    rng = np.random.default_rng(100 + b)
    for i, tile in enumerate(FEW_TILES):
        kind = list(check.KINDS)[(b + i) % len(check.KINDS)]
        logits, bias = check.make_inputs(kind, b, 10 * b + i)
        ids = check.expected(logits, bias, SCALE, True, None)[0][:b]
        for offset, count in local_ranges(ids, rng):
            local = check.Local(offset, count, tile)
            lines = check.run_case(logits, bias, SCALE, i % 2 == 0, local)
            assert not lines, check.describe(kind, 10 * b + i, b, SCALE, i % 2 == 0, local, lines)


@pytest.mark.parametrize("row_stride", (260, 512, 4096))
def test_strided_logits_rows(row_stride):
    for b in (2, MAX_TOKENS):
        assert_case("ties", row_stride + b, b, True, check.Local(8, 100, 5), row_stride=row_stride)


def test_cuda_graph_replay_gives_the_same_bits():
    """One graph holds a route with metadata and one without; replays on new logits match the model."""
    b, local = 6, check.Local(16, 200, 3)
    logits, bias = check.make_inputs("normal", b, 1)
    with_meta = check.make_buffers(logits, bias, local, "cuda")
    plain = check.make_buffers(logits, bias, None, "cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        check.call_route(with_meta, SCALE, True, local)
        check.call_route(plain, SCALE, False, None)
    for seed, kind in enumerate(check.KINDS):
        logits, _ = check.make_inputs(kind, b, 200 + seed)
        for buffers in (with_meta, plain):
            buffers.logits.copy_(torch.from_numpy(logits))
            buffers.poison()
        graph.replay()
        torch.cuda.synchronize()
        for buffers, renormalize, req in ((with_meta, True, local), (plain, False, None)):
            want = check.expected(logits, bias, SCALE, renormalize, req)
            lines = check.compare(buffers, want, req.tile if req else 0)
            assert not lines, check.describe(kind, 200 + seed, b, SCALE, renormalize, req, lines)


def test_compiling_during_capture_raises_a_clear_error():
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="prepare"):
        with torch.cuda.graph(graph):
            routing.compile_routing(False, True)


# ---------------------------------------------------------------------------------------------- PDL

DELAY_NS = 5_000_000  # far longer than the host needs to launch the next kernel


@triton.jit
def _late_copy(src, dst, n, delay_ns, BLOCK: tl.constexpr):
    """Let dependents launch at once, wait ``delay_ns``, then copy src to dst."""
    tl.extra.cuda.gdc_launch_dependents()
    start = tl.extra.cuda.globaltimer()
    while tl.extra.cuda.globaltimer() - start < delay_ns:
        pass
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(dst + offsets, tl.load(src + offsets, mask=mask), mask=mask)


@triton.jit
def _probe(src, early, late, n, BLOCK: tl.constexpr):
    """Read src before and after griddepcontrol.wait (launched with PDL)."""
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(early + offsets, tl.load(src + offsets, mask=mask, volatile=True), mask=mask)
    tl.extra.cuda.gdc_wait()
    tl.store(late + offsets, tl.load(src + offsets, mask=mask, volatile=True), mask=mask)


def _produce(fresh, target):
    n = target.numel()
    _late_copy[(1,)](fresh, target, n, DELAY_NS, BLOCK=triton.next_power_of_2(n))


def test_a_producer_writing_the_logits_just_before_is_waited_for():
    """A producer writes the logits late, after letting dependents launch. A probe launched the same way
    sees stale data before its wait (so the window is real); the routing kernel must see only new data."""
    b, local = MAX_TOKENS, check.Local(0, EXPERTS, 8)
    stale, _ = check.make_inputs("normal", b, 11)
    fresh, bias = check.make_inputs("ties", b, 12)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        source = torch.from_numpy(fresh).cuda()
        target = torch.from_numpy(stale).cuda()
        early, late = torch.empty_like(target), torch.empty_like(target)
        n = target.numel()
        for _ in range(2):  # the first round compiles both Triton kernels; the second is the measurement
            target.copy_(torch.from_numpy(stale))
            stream.synchronize()
            _produce(source, target)
            _probe[(1,)](target, early, late, n, BLOCK=triton.next_power_of_2(n), launch_pdl=True)
            stream.synchronize()
        assert torch.equal(late, source), "the probe read wrong data after its wait"
        assert torch.equal(early, torch.from_numpy(stale).cuda()), \
            "the producer's window did not open: this test could not show a misplaced wait"
        for renormalize in (True, False):
            target.copy_(torch.from_numpy(stale))
            buffers = check.make_buffers(stale, bias, local, "cuda")
            buffers.logits = target
            stream.synchronize()
            _produce(source, target)
            check.call_route(buffers, SCALE, renormalize, local)
            stream.synchronize()
            lines = check.compare(buffers, check.expected(fresh, bias, SCALE, renormalize, local), local.tile)
            assert not lines, check.describe("ties(after producer)", 12, b, SCALE, renormalize, local, lines)


# ---------------------------------------------------------------------------------------------- contract

def test_device_checks_and_nothing_written_on_rejection():
    local = check.Local(0, EXPERTS, 8)
    logits, bias = check.make_inputs("normal", 4, 5)
    buffers = check.make_buffers(logits, bias, local, "cuda")
    with pytest.raises(ValueError, match=r"^route: bias must be on the logits' device"):
        routing.route(buffers.logits, buffers.bias.cpu(), buffers.ids, buffers.weights, SCALE, True,
                      buffers.metadata_all, local.offset, local.count, local.tile)
    with pytest.raises(ValueError, match=r"^route: metadata must be on the logits' device"):
        routing.route(buffers.logits, buffers.bias, buffers.ids, buffers.weights, SCALE, True,
                      buffers.metadata_all.cpu(), local.offset, local.count, local.tile)
    with pytest.raises(ValueError, match=r"^route: tile_n"):
        routing.route(buffers.logits, buffers.bias, buffers.ids, buffers.weights, SCALE, True,
                      buffers.metadata_all, local.offset, local.count, 0)
    with pytest.raises(ValueError, match=r"^route: metadata must hold"):
        routing.route(buffers.logits, buffers.bias, buffers.ids, buffers.weights, SCALE, True,
                      buffers.metadata_all[:100], local.offset, local.count, local.tile)
    torch.cuda.synchronize()
    assert (buffers.ids_all.cpu() == check.POISON_ID).all()
    assert (buffers.weights_all.view(torch.int32).cpu() == check.POISON_WEIGHT_BITS).all()
    assert (buffers.metadata_all.cpu() == check.POISON_METADATA).all()


def test_runs_on_the_current_stream():
    """route goes behind a long sleep on a side stream: right after it, the default stream sees poison."""
    logits, bias = check.make_inputs("wide", 7, 3)
    buffers = check.make_buffers(logits, bias, None, "cuda")
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(50_000_000)
        check.call_route(buffers, SCALE, True, None)
    with torch.cuda.stream(torch.cuda.default_stream()):
        assert (buffers.ids_all.cpu() == check.POISON_ID).all(), "route did not wait behind its stream's work"
    stream.synchronize()
    lines = check.compare(buffers, check.expected(logits, bias, SCALE, True, None), 0)
    assert not lines, "\n".join(lines)
