"""The routing kernel on the GPU against the NumPy model, bit for bit, through the engine.

Inputs: properties/inputs/families.py (14 families of fixed-seed adversarial rows, shared with the Triton
oracle's tests), cut into batches of every b. Every case runs through properties/engine/device.py: outputs and
metadata are poisoned before every call, in buffers larger than the contract's, so a write past the last
token row, past metadata_size(tile) or into an element the kernel must leave (the guard, the unused fields)
shows. About a minute on an H200.
"""

from dataclasses import replace

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from kernel import routing
from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS
from properties.engine import device
from properties.engine.implementations import REGISTRY
from properties.engine.poison import IDS_POISON, METADATA_POISON, WEIGHT_POISON_BITS
from properties.engine.floats import FLT_MAX_BITS, f32
from properties.inputs.families import batches, families, pooled_rows, unpicked_range

from helpers import NO_METADATA, case_of

pytestmark = pytest.mark.gpu

FAMILIES = families()
SCALES = {"2.5": np.float32(2.5), "1.0": np.float32(1.0), "0.0": np.float32(0.0), "subnormal": f32(0x00123456)[()],
          "max_float32": f32(FLT_MAX_BITS)[()]}
SCALE = np.float32(2.5)
FEW_TILES = (1, 2, 3, 4, 7, 8, 16, 100, 255, 256)


@pytest.fixture(scope="module", autouse=True)
def prepared():
    for renormalize in (True, False):
        routing.prepare(renormalize)


def family_batches(b):
    """(label, rows [b, 256], bias) for every batch of b rows of every family."""
    return [(f"{f.name} b={b} batch {i}", rows, f.bias) for f in FAMILIES for i, rows in enumerate(batches(f.rows, b))]


def assert_routes(case, row_stride=EXPERTS):
    lines = device.route(case, row_stride=row_stride).mismatches()
    assert not lines, device.report(case, lines)


def assert_cases(cases, scale, renormalize, request_for=lambda i, rows: NO_METADATA, row_stride=EXPERTS):
    """Route every case; fail with the first mismatching cases."""
    reports = []
    for i, (label, rows, bias) in enumerate(cases):
        case = case_of(label, rows, bias, scale, renormalize, request_for(i, rows))
        lines = device.route(case, row_stride=row_stride).mismatches()
        if lines:
            reports.append(device.report(case, lines))
    assert cases and not reports, f"{len(reports)} of {len(cases)} cases differ:\n" + "\n".join(reports[:4])


@pytest.mark.parametrize("scale", sorted(SCALES))
@pytest.mark.parametrize("renormalize", (True, False))
@pytest.mark.parametrize("b", range(1, MAX_TOKENS + 1))
def test_ids_and_weights_match_the_model(b, renormalize, scale):
    assert_cases(family_batches(b), SCALES[scale], renormalize)


@pytest.mark.parametrize("renormalize", (True, False))
@pytest.mark.parametrize("b", range(1, MAX_TOKENS + 1))
def test_with_metadata_every_family_batch(b, renormalize):
    """Every family batch with the metadata of all 256 experts, the tile cycling through a few values."""
    assert_cases(family_batches(b), SCALE, renormalize, lambda i, rows: (FEW_TILES[i % len(FEW_TILES)], 0, EXPERTS))


@pytest.mark.parametrize("b", (1, 3, MAX_TOKENS))
def test_metadata_every_tile(b):
    """Every tile 1..256 on pooled adversarial rows; the local range alternates between all and random."""
    rng = np.random.default_rng(b)
    for tile in range(1, MAX_TILE + 1):
        offset = int(rng.integers(0, EXPERTS))
        local = (0, EXPERTS) if tile % 2 else (offset, int(rng.integers(0, EXPERTS - offset + 1)))
        family = FAMILIES[tile % len(FAMILIES)]
        assert_routes(case_of(f"pooled rows seed {tile}, {family.name} bias", pooled_rows(FAMILIES, b, seed=tile),
                              family.bias, SCALE, tile % 3 != 0, (tile, *local)))


def local_ranges(ids, rng):
    """All experts, none of the picked ones, one picked expert, the last experts, random, empty."""
    offset = int(rng.integers(0, EXPERTS))
    return [(0, EXPERTS), unpicked_range(ids), (int(ids[0, 0]), 1), (EXPERTS - 16, 16),
            (offset, int(rng.integers(0, EXPERTS - offset + 1))), (EXPERTS, 0), (40, 0)]


@pytest.mark.parametrize("b", range(1, MAX_TOKENS + 1))
def test_metadata_local_ranges(b):
    rng = np.random.default_rng(100 + b)
    cases = family_batches(b)
    for i, tile in enumerate(FEW_TILES):
        label, rows, bias = cases[(7 * i) % len(cases)]
        ids = REGISTRY["model"].run(case_of(label, rows, bias, SCALE, True)).ids
        for offset, count in local_ranges(ids, rng):
            assert_routes(case_of(label, rows, bias, SCALE, i % 2 == 0, (tile, offset, count)))


@pytest.mark.parametrize("row_stride", (260, 512, 4096))
def test_strided_logits_rows(row_stride):
    for b in (2, MAX_TOKENS):
        assert_cases(family_batches(b)[::5], SCALE, True, lambda i, rows: (5, 8, 100), row_stride=row_stride)


def test_cuda_graph_replay_gives_the_same_bits():
    """One graph holds a route with metadata and one without; replays on new logits match the model."""
    b, bias = 6, FAMILIES[0].bias
    rows = [rows for _, rows, _ in family_batches(b)]
    with_meta = device.buffers(case_of("graph capture", rows[0], bias, SCALE, True, (3, 16, 200)))
    plain = device.buffers(case_of("graph capture", rows[0], bias, SCALE, False))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        device.launch(with_meta)
        device.launch(plain)
    for n, logits in enumerate(rows):
        for buffers in (with_meta, plain):
            buffers.load(replace(buffers.case, logits=np.ascontiguousarray(logits), generator=f"graph replay {n}"))
        graph.replay()
        torch.cuda.synchronize()
        for buffers in (with_meta, plain):
            lines = buffers.mismatches()
            assert not lines, device.report(buffers.case, lines)


def test_compiling_during_capture_raises_a_clear_error():
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="prepare"):
        with torch.cuda.graph(graph):
            routing.compile_routing(False, True, 0)


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
    stale = pooled_rows(FAMILIES, MAX_TOKENS, seed=11)
    fresh, bias = pooled_rows(FAMILIES, MAX_TOKENS, seed=12), FAMILIES[2].bias
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
            # Compared with the fresh rows: the kernel reads ``target``, which holds the stale ones until the
            # producer writes.
            buffers = device.buffers(case_of("pooled rows seed 12 after the producer", fresh, bias, SCALE,
                                             renormalize, (8, 0, EXPERTS)))
            buffers.logits = target
            stream.synchronize()
            _produce(source, target)
            device.launch(buffers)
            stream.synchronize()
            lines = buffers.mismatches()
            assert not lines, device.report(buffers.case, lines)


# ---------------------------------------------------------------------------------------------- contract

def test_device_checks_and_nothing_written_on_rejection():
    family = FAMILIES[-1]
    buffers = device.buffers(case_of("rejected calls", family.rows[:4], family.bias, SCALE, True, (8, 0, EXPERTS)))
    call = (buffers.logits, buffers.bias, buffers.ids, buffers.weights, float(SCALE), True)
    with pytest.raises(ValueError, match=r"^route: bias must be on the logits' device"):
        routing.route(*call[:1], buffers.bias.cpu(), *call[2:], buffers.metadata_all, 0, EXPERTS, 8)
    with pytest.raises(ValueError, match=r"^route: metadata must be on the logits' device"):
        routing.route(*call, buffers.metadata_all.cpu(), 0, EXPERTS, 8)
    with pytest.raises(ValueError, match=r"^route: tile_n"):
        routing.route(*call, buffers.metadata_all, 0, EXPERTS, 0)
    with pytest.raises(ValueError, match=r"^route: metadata must hold"):
        routing.route(*call, buffers.metadata_all[:100], 0, EXPERTS, 8)
    torch.cuda.synchronize()
    assert (buffers.ids_all.cpu() == IDS_POISON).all()
    assert (buffers.weights_all.view(torch.int32).cpu() == WEIGHT_POISON_BITS).all()
    assert (buffers.metadata_all.cpu() == METADATA_POISON).all()


def test_runs_on_the_current_stream():
    """route goes behind a long sleep on a side stream: right after it, the default stream sees poison."""
    family = FAMILIES[-1]
    buffers = device.buffers(case_of("behind a sleep", family.rows[:7], family.bias, SCALE, True))
    torch.cuda.synchronize()
    _launch_behind_a_sleep(buffers, "route")


def _launch_behind_a_sleep(buffers, what):
    """Launch ``buffers`` behind a long sleep on a side stream: right after it the default stream still sees the
    poison, and once the side stream is done the outputs are the model's."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(50_000_000)
        device.launch(buffers)
    with torch.cuda.stream(torch.cuda.default_stream()):
        assert (buffers.ids_all.cpu() == IDS_POISON).all(), f"{what} did not wait behind its stream's work"
    stream.synchronize()
    lines = buffers.mismatches()
    assert not lines, "\n".join(lines)


# ---------------------------------------------------------------------------------------------- the launch path

def test_a_repeated_call_launches_its_own_buffers_with_their_new_contents():
    """A cache hit launches the addresses its key holds: the same buffers loaded with new logits give the new
    outputs, and a call on other buffers of the same shapes writes those, leaving the first ones' poison."""
    b, bias = 5, FAMILIES[1].bias
    rows = [rows for _, rows, _ in family_batches(b)][:3]
    for request, renormalize in ((NO_METADATA, True), ((3, 16, 200), False)):
        first = device.buffers(case_of("first buffers", rows[0], bias, SCALE, renormalize, request))
        device.launch(first)
        for n, logits in enumerate(rows[1:]):
            first.load(replace(first.case, logits=np.ascontiguousarray(logits), generator=f"reloaded {n}"))
            device.launch(first)
            torch.cuda.synchronize()
            lines = first.mismatches()
            assert not lines, device.report(first.case, lines)
        first.poison()
        other = device.buffers(case_of("other buffers", rows[2], bias, SCALE, renormalize, request))
        device.launch(other)
        torch.cuda.synchronize()
        lines = other.mismatches()
        assert not lines, device.report(other.case, lines)
        assert (first.ids_all.cpu() == IDS_POISON).all(), "a call on other buffers wrote the first ones"


def test_a_repeated_call_runs_on_the_current_stream():
    """The cached launch reads the current stream at each call: behind a long sleep on a side stream, the
    default stream still sees poison."""
    family = FAMILIES[-1]
    buffers = device.buffers(case_of("behind a sleep, cached", family.rows[:3], family.bias, SCALE, True, (4, 0, 64)))
    device.launch(buffers)
    torch.cuda.synchronize()
    buffers.poison()
    torch.cuda.synchronize()
    _launch_behind_a_sleep(buffers, "the cached call")


def test_a_call_made_while_another_device_is_current_launches_from_the_logits_device(monkeypatch):
    """route launches from the logits' device when the current device is another one (here route is told of
    another current index, so its switch to the logits' device runs on one GPU too), first and cached."""
    family = FAMILIES[2]
    another = torch.cuda.current_device() + 1
    for n in range(2):
        buffers = device.buffers(case_of(f"another device current {n}", family.rows[:4], family.bias, SCALE, True,
                                         (8, 0, EXPERTS)))
        for _ in range(2):
            buffers.poison()
            with monkeypatch.context() as patched:  # route's own view of the current device, nothing else's
                patched.setattr(routing, "current_device", lambda: another)
                routing.route(*device.route_args(buffers))
            torch.cuda.synchronize()
            lines = buffers.mismatches()
            assert not lines, device.report(buffers.case, lines)


def test_the_compiled_variant_refuses_launch_arguments_of_another_form():
    """The compiled TVM-FFI function takes the launch arguments route passes and the stream, and refuses a call
    of another form with a TypeError naming it, before anything is launched."""
    fn = routing.compiled_routing(False, True, 0)
    with pytest.raises(TypeError, match="Expects 8 parameters"):
        fn(0, 0, 0, 0, 1, EXPERTS, 1.0)
    with pytest.raises(TypeError, match="Mismatched type on argument #4"):
        fn(0, 0, 0, 0, 1.5, EXPERTS, 1.0, 0)
