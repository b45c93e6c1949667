"""FlashInfer's routingIndicesDynBlockKernel against the NumPy model's routing_metadata, every META element.

For each b in 1..8 and every tile 1..256, two duplicate-free id sets (one random, one of a rotating
adversarial kind), each under 18 local ranges: all experts, one picked expert, the widest range holding no
picked expert, an empty range, and every rank of a split of the 256 experts into 2, 4 and 8 ranks (random
cuts for the random ids, even cuts for the adversarial ones). 36 cases per (b, tile): 9,216 per b, 73,728
in all. Both sides start from the same poison, so elements neither writes are compared too.
"""

import ctypes

import numpy as np
import pytest

from kernel.layout import (
    EXPERTS,
    MAX_CTAS,
    MAX_TILE,
    MAX_TOKENS,
    ROUTES,
    TOP_K,
)
from oracles.flashinfer_routing import DEFAULT_POISON, dyn_block_metadata, load_library, to_meta
from oracles.numpy_model import routing_metadata
from properties.engine.cases import Outputs
from properties.engine.compare import describe, disagreements
from properties.inputs.families import unpicked_range

pytestmark = pytest.mark.gpu

SEED = 0x5EED_F1A5
RANKS = (2, 4, 8)
RANGES_PER_IDS = 4 + sum(RANKS)
IDS_PER_TILE = 2
MAX_REPORTED = 5


def _random_ids(rng, b):
    return np.stack([rng.permutation(EXPERTS)[:TOP_K] for _ in range(b)]).astype(np.int32)


def _same_experts(rng, b):
    """Every token on the same 8 experts, in one order: the most tokens per expert."""
    return np.tile(rng.permutation(EXPERTS)[:TOP_K], (b, 1)).astype(np.int32)


def _same_experts_shuffled(rng, b):
    """The same 8 experts in a different pick order per token: rows follow token order, not pick order."""
    experts = rng.permutation(EXPERTS)[:TOP_K]
    return np.stack([rng.permutation(experts) for _ in range(b)]).astype(np.int32)


def _edges(rng, b):
    """Experts 0 and 255 with their neighbours, picked from the outside in."""
    row = np.array([EXPERTS - 1, 0, EXPERTS - 2, 1, EXPERTS - 3, 2, EXPERTS - 4, 3])
    return np.stack([np.roll(row, t) for t in range(b)]).astype(np.int32)


def _disjoint(rng, b):
    """Each expert picked by one token at most (8 per token, 4 apart), in descending order."""
    return (np.arange(b * TOP_K).reshape(b, TOP_K)[:, ::-1] * (EXPERTS // ROUTES)).astype(np.int32)


def _shared_hot_expert(rng, b):
    """Random rows that all hold expert 128, at a different pick position per token."""
    rows = []
    for t in range(b):
        others = rng.permutation(np.delete(np.arange(EXPERTS), EXPERTS // 2))[:TOP_K - 1]
        rows.append(np.insert(others, t % TOP_K, EXPERTS // 2))
    return np.stack(rows).astype(np.int32)


ADVERSARIAL = (_same_experts, _same_experts_shuffled, _edges, _disjoint, _shared_hot_expert)


def _split(cuts):
    """The ranks [a, b) between consecutive cut points 0 = c0 < c1 < ... < EXPERTS."""
    return list(zip(cuts[:-1], np.diff(cuts)))


def _random_split(rng, ranks):
    inner = np.sort(rng.choice(np.arange(1, EXPERTS), ranks - 1, replace=False))
    return _split(np.concatenate([[0], inner, [EXPERTS]]))


def _even_split(rng, ranks):
    return _split(np.arange(0, EXPERTS + 1, EXPERTS // ranks))


def _ranges(rng, ids, split):
    ranges = [(0, EXPERTS), (int(ids[-1, 0]), 1), unpicked_range(ids), (int(rng.integers(EXPERTS + 1)), 0)]
    for ranks in RANKS:
        ranges += split(rng, ranks)
    return [(int(offset), int(count)) for offset, count in ranges]


def _cases(b):
    """(ids, local_expert_offset, num_local_experts, tile_n) for every case of b tokens."""
    rng = np.random.default_rng([SEED, b])
    for tile in range(1, MAX_TILE + 1):
        kind = ADVERSARIAL[(tile + b) % len(ADVERSARIAL)]
        for ids, split in ((_random_ids(rng, b), _random_split), (kind(rng, b), _even_split)):
            for offset, count in _ranges(rng, ids, split):
                yield ids, offset, count, tile


def _mismatch(ids, offset, count, tile, got, want, reference="model"):
    """None when FlashInfer's metadata ``got`` equals ``want`` bit for bit (the engine's comparison), else one
    line naming the case and the first differing elements."""
    found = disagreements({reference: Outputs(None, None, want), "flashinfer": Outputs(None, None, got)},
                          reference=reference, tile_n=tile)
    if not found:
        return None
    return f"ids={ids.tolist()} local=[{offset}, {offset + count}) tile={tile}: " + "; ".join(map(describe, found))


@pytest.mark.parametrize("b", range(1, MAX_TOKENS + 1))
def test_flashinfer_matches_numpy_model(b):
    compared, mismatches = 0, []
    for ids, offset, count, tile in _cases(b):
        got = to_meta(dyn_block_metadata(ids, offset, count, tile, poison=DEFAULT_POISON))
        want = routing_metadata(ids, offset, count, tile, fill=DEFAULT_POISON)
        compared += 1
        if (line := _mismatch(ids, offset, count, tile, got, want)) is not None:
            mismatches.append(line)
    assert compared == MAX_TILE * IDS_PER_TILE * RANGES_PER_IDS
    assert not mismatches, f"{len(mismatches)} of {compared} cases differ; first:\n" + \
        "\n".join(mismatches[:MAX_REPORTED])


def test_written_elements_do_not_depend_on_the_poison():
    """The poison never leaks into what FlashInfer writes: two poisons, the same written elements."""
    ids = _random_ids(np.random.default_rng(SEED), MAX_TOKENS)
    first = dyn_block_metadata(ids, 0, EXPERTS, 3, poison=-2)
    second = dyn_block_metadata(ids, 0, EXPERTS, 3, poison=-(2**31))
    written = to_meta(first) != -2
    assert np.array_equal(written, to_meta(second) != -(2**31))
    assert np.array_equal(to_meta(first)[written], to_meta(second)[written])


def test_dispatch_outside_the_compiled_instance_launches_nothing_and_says_so():
    """512 experts select another FlashInfer tier, not compiled here: the library reports it, not success."""
    ids = np.arange(TOP_K, dtype=np.int32)
    out = [np.zeros(n, np.int32) for n in (ROUTES, MAX_CTAS, MAX_CTAS, MAX_CTAS, 2)]
    i32p = ctypes.POINTER(ctypes.c_int32)
    ptr = [a.ctypes.data_as(i32p) for a in out]
    message = ctypes.create_string_buffer(512)
    status = load_library().fi_dyn_block_metadata(
        ids.ctypes.data_as(i32p), 1, 2 * EXPERTS, TOP_K, 0, 2 * EXPERTS, 1, -2, ptr[0], ROUTES, ptr[1], ptr[2],
        MAX_CTAS, ptr[3], MAX_CTAS, ptr[4], message, len(message))
    assert status == 3 and b"launched nothing" in message.value


# ---------------------------------------------------------------------------------------------- enqueue

ENQUEUE_TILES = (1, 3, 8, 64, 256)


@pytest.mark.parametrize("use_pdl", (False, True))
@pytest.mark.parametrize("b", range(1, MAX_TOKENS + 1))
def test_enqueued_launch_matches_the_oracle_entry(b, use_pdl):
    """fi_dyn_block_enqueue on torch buffers and stream writes what fi_dyn_block_metadata returns, every
    element (both start from the same poison); a few tiles and local ranges per b."""
    import torch

    from oracles.flashinfer_routing.enqueue import device_buffers, enqueue, read_back
    rng = np.random.default_rng([SEED, b, 1])
    compared, mismatches = 0, []
    for tile in ENQUEUE_TILES:
        ids = _random_ids(rng, b)
        for offset, count in ((0, EXPERTS), unpicked_range(ids), *_random_split(rng, 4)):
            buffers = device_buffers(torch.from_numpy(ids).cuda(), tile)
            enqueue(buffers, offset, count, use_pdl=use_pdl)
            got = to_meta(read_back(buffers))
            want = to_meta(dyn_block_metadata(ids, offset, count, tile, poison=DEFAULT_POISON))
            compared += 1
            if (line := _mismatch(ids, offset, count, tile, got, want, "oracle entry")) is not None:
                mismatches.append(line)
    assert compared == len(ENQUEUE_TILES) * 6
    assert not mismatches, "\n".join(mismatches[:MAX_REPORTED])


def test_enqueue_is_captured_by_a_torch_cuda_graph_and_replays_on_new_ids():
    import torch

    from oracles.flashinfer_routing.enqueue import device_buffers, enqueue, read_back
    rng = np.random.default_rng([SEED, 2])
    first, second = _random_ids(rng, MAX_TOKENS), _same_experts(rng, MAX_TOKENS)
    buffers = device_buffers(torch.from_numpy(first).cuda(), 8)
    enqueue(buffers, 0, EXPERTS)  # outside capture first: the library's runtime loads the kernel
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        enqueue(buffers, 0, EXPERTS, use_pdl=True)
    for ids in (first, second):
        buffers.ids.copy_(torch.from_numpy(ids))
        buffers.poison()
        graph.replay()
        got = to_meta(read_back(buffers))
        want = to_meta(dyn_block_metadata(ids, 0, EXPERTS, 8, poison=DEFAULT_POISON))
        line = _mismatch(ids, 0, EXPERTS, 8, got, want, "oracle entry")
        assert line is None, line


def test_enqueue_refuses_undersized_buffers_before_launching():
    import dataclasses

    import torch

    from oracles.flashinfer_routing.enqueue import device_buffers, enqueue
    buffers = device_buffers(torch.from_numpy(_random_ids(np.random.default_rng(SEED), 2)).cuda(), 8)
    small = dataclasses.replace(buffers, permuted_to_token=buffers.permuted_to_token[:-1])
    with pytest.raises(ValueError, match="permuted_to_token"):
        enqueue(small, 0, EXPERTS)
    with pytest.raises(ValueError, match="num_local_experts"):
        enqueue(buffers, 200, 57)
