"""The CuTe kernel against the Triton oracle (ids, weight bits) and against FlashInfer's metadata kernel fed
the CuTe kernel's own ids (every META element, poisoned beforehand), on the H200. Both run through the
engine: the registry's implementations on one RoutingCase, compared by its bitwise comparison."""

import numpy as np
import pytest

from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS
from properties.engine.cases import Outputs
from properties.engine.compare import describe, disagreements
from properties.engine.implementations import REGISTRY
from properties.engine.floats import FLT_MAX_BITS, f32
from properties.inputs.families import batches, families, unpicked_range

from helpers import case_of

pytestmark = pytest.mark.gpu

SCALES = (np.float32(1.0), np.float32(2.5), np.float32(0.0), np.float32(2.0**-140), f32(FLT_MAX_BITS)[()])
FAMILIES = families()
MAX_REPORTED = 3


@pytest.mark.parametrize("b", range(1, MAX_TOKENS + 1))
@pytest.mark.parametrize("renormalize", [True, False])
def test_kernel_equals_triton_oracle(b, renormalize, cases):
    n, failures = 0, []
    for family in FAMILIES:
        for logits in batches(family.rows, b):
            for scale in SCALES:
                case = case_of(family.name, logits, family.bias, scale, renormalize)
                found = disagreements({"triton": REGISTRY["triton"].run(case), "cute": REGISTRY["cute"].run(case)},
                                      reference="triton")
                n += 1
                if found:
                    failures.append(f"{case.describe()}: " + "; ".join(map(describe, found)))
    cases(n)
    assert not failures, f"{len(failures)} of {n} batches differ:\n" + "\n".join(failures[:MAX_REPORTED])


RANKS = (2, 4, 8)


def _rank_split(rng, ranks):
    """Every rank's (offset, count) of a random split of the 256 experts into ``ranks`` ranges."""
    cuts = np.concatenate([[0], np.sort(rng.choice(np.arange(1, EXPERTS), ranks - 1, replace=False)), [EXPERTS]])
    return [(int(lo), int(hi - lo)) for lo, hi in zip(cuts[:-1], cuts[1:])]


def _local_ranges(ids, rng):
    """All experts, one picked expert, the widest unpicked run, the last 16, and every rank of random
    splits into 2, 4 and 8 ranks."""
    ranges = [(0, EXPERTS), (int(ids[0, 0]), 1), unpicked_range(ids), (EXPERTS - 16, 16)]
    for ranks in RANKS:
        ranges += _rank_split(rng, ranks)
    return ranges


# Every tile 1..MAX_TILE, in TILE_PARTS parts a test each: seconds apiece, so that the gate's workers share them.
TILE_PARTS = 4


@pytest.mark.parametrize("part", range(TILE_PARTS))
@pytest.mark.parametrize("b", range(1, MAX_TOKENS + 1))
def test_kernel_metadata_equals_flashinfer_fed_the_kernels_ids(b, part, cases):
    """Tiles ``part``, ``part`` + TILE_PARTS, ... of 1..MAX_TILE, each with its own random draws."""
    from oracles.flashinfer_routing import dyn_block_metadata, to_meta
    from properties.engine.poison import METADATA_POISON

    pool = np.concatenate([f.rows for f in FAMILIES])
    bias_pool = [f.bias for f in FAMILIES]
    n, failures = 0, []
    for tile in range(1 + part, MAX_TILE + 1, TILE_PARTS):
        rng = np.random.default_rng([b, tile])
        family = int(rng.integers(len(FAMILIES)))
        logits = pool[rng.integers(0, len(pool), b)]
        picked = REGISTRY["cute"].run(case_of("pooled rows", logits, bias_pool[family], np.float32(1.0), True)).ids
        for offset, count in _local_ranges(picked, rng):
            case = case_of(f"pooled rows tile={tile}", logits, bias_pool[family], np.float32(1.0), True,
                         (tile, offset, count))
            kernel = REGISTRY["cute"].run(case)
            fed = to_meta(dyn_block_metadata(kernel.ids, offset, count, tile, poison=METADATA_POISON))
            found = disagreements({"flashinfer": Outputs(None, None, fed),
                                   "cute": Outputs(None, None, kernel.metadata)}, reference="flashinfer", tile_n=tile)
            n += 1
            if found:
                failures.append(f"{case.describe()} ids={kernel.ids.tolist()}: " + "; ".join(map(describe, found)))
    cases(n)
    assert not failures, f"{len(failures)} of {n} cases differ:\n" + "\n".join(failures[:MAX_REPORTED])
