"""The CuTe kernel against the Triton oracle (ids, weight bits) and against FlashInfer's metadata kernel fed
the CuTe kernel's own ids (every META element, poisoned beforehand), on the H200."""

import numpy as np
import pytest
import torch

from kernel import check
from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS, metadata_size
from properties.families import batches, families

pytestmark = pytest.mark.gpu

SCALES = (1.0, 2.5, 0.0, float(np.float32(2.0**-140)), float(np.finfo(np.float32).max))
FAMILIES = families()


def _kernel(logits, bias, scale, renormalize, local, poison=None):
    buffers = check.make_buffers(logits, bias, local, "cuda")
    if poison is not None:
        buffers.metadata_all.fill_(poison)
    check.call_route(buffers, scale, renormalize, local)
    torch.cuda.synchronize()
    return buffers


@pytest.mark.parametrize("b", range(1, MAX_TOKENS + 1))
@pytest.mark.parametrize("renormalize", [True, False])
def test_kernel_equals_triton_oracle(b, renormalize, cases):
    from oracles.triton_routing import fused_musespark1x_routing

    n, failures = 0, []
    for family in FAMILIES:
        bias = torch.from_numpy(family.bias).cuda()
        for logits in batches(family.rows, b):
            for scale in SCALES:
                buffers = _kernel(logits, family.bias, scale, renormalize, None)
                weights, ids = fused_musespark1x_routing(torch.from_numpy(logits).cuda(), bias,
                                                         renormalize=renormalize, routed_scaling_factor=scale)
                got = (buffers.ids.cpu().numpy(), buffers.weights.view(torch.int32).cpu().numpy())
                want = (ids.cpu().numpy(), weights.view(torch.int32).cpu().numpy())
                n += 1
                if not (np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])):
                    failures.append(f"{family.name} scale={scale!r}: kernel ids {got[0].tolist()} weights "
                                    f"{[[f'{v & 0xFFFFFFFF:08x}' for v in r] for r in got[1]]}; triton ids "
                                    f"{want[0].tolist()} weights "
                                    f"{[[f'{v & 0xFFFFFFFF:08x}' for v in r] for r in want[1]]}")
    cases(n)
    assert not failures, f"{len(failures)} of {n} batches differ:\n" + "\n".join(failures[:3])


RANKS = (2, 4, 8)


def _rank_split(rng, ranks):
    """Every rank's (offset, count) of a random split of the 256 experts into ``ranks`` ranges."""
    cuts = np.concatenate([[0], np.sort(rng.choice(np.arange(1, EXPERTS), ranks - 1, replace=False)), [EXPERTS]])
    return [(int(lo), int(hi - lo)) for lo, hi in zip(cuts[:-1], cuts[1:])]


def _local_ranges(ids, rng):
    """All experts, one picked expert, the widest unpicked run, the last 16, and every rank of random
    splits into 2, 4 and 8 ranks."""
    ranges = [(0, EXPERTS), (int(ids[0, 0]), 1), check.unpicked_range(ids), (EXPERTS - 16, 16)]
    for ranks in RANKS:
        ranges += _rank_split(rng, ranks)
    return ranges


@pytest.mark.parametrize("b", range(1, MAX_TOKENS + 1))
def test_kernel_metadata_equals_flashinfer_fed_the_kernels_ids(b, cases):
    from oracles.flashinfer_routing import DEFAULT_POISON, dyn_block_metadata, to_meta

    rng = np.random.default_rng(b)
    pool = np.concatenate([f.rows for f in FAMILIES])
    bias_pool = [f.bias for f in FAMILIES]
    n, failures = 0, []
    for tile in range(1, MAX_TILE + 1):
        family = int(rng.integers(len(FAMILIES)))
        logits = np.ascontiguousarray(pool[rng.integers(0, len(pool), b)])
        picked = _kernel(logits, bias_pool[family], 1.0, True, None).ids.cpu().numpy()
        for offset, count in _local_ranges(picked, rng):
            local = check.Local(offset, count, tile)
            buffers = _kernel(logits, bias_pool[family], 1.0, True, local, poison=DEFAULT_POISON)
            kernel_ids = buffers.ids.cpu().numpy()
            got = buffers.metadata_all.cpu().numpy()[:metadata_size(tile)]
            want = to_meta(dyn_block_metadata(kernel_ids, offset, count, tile, poison=DEFAULT_POISON))
            n += 1
            bad = np.flatnonzero(got != want)
            if bad.size:
                failures.append(f"tile={tile} local=[{offset}, {offset + count}) ids={kernel_ids.tolist()}: "
                                + "; ".join(f"{check.metadata_field(i, tile)} kernel {got[i]} flashinfer {want[i]}"
                                            for i in bad[:5]))
    cases(n)
    assert not failures, f"{len(failures)} of {n} cases differ:\n" + "\n".join(failures[:3])
