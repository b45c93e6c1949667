"""The metadata invariant checker (properties/engine/invariants.py) on the model's metadata of one hand-derived case
(tests/test_model_routing.py: two tokens, experts 4..7 local, tile 3) and on hand-made breaks of it: each
break is reported with the invariant it breaks, and the real metadata passes."""

import numpy as np
import pytest

import oracles.numpy_model as model
from kernel.layout import (
    META_CTA_BATCH,
    META_CTA_LIMIT,
    META_EXPANDED_TO_PERMUTED,
    META_NUM_CTAS,
    META_PADDED_TOKENS,
    META_PERMUTED_TO_TOKEN,
)
from properties.engine.invariants import metadata_violations

FILL = -7
OFFSET, COUNT, TILE = 4, 4, 3
E2P, ROW = META_EXPANDED_TO_PERMUTED, META_PERMUTED_TO_TOKEN
IDS = np.array([list(range(8)), list(range(4, 12))], np.int32)


def _real():
    # Expert 4 + j holds routes 4 + j (token 0) and 8 + j (token 1): CTA j, rows 3j (token 0), 3j + 1 (token 1),
    # 3j + 2 padding, limit 3j + 2.
    return model.routing_metadata(IDS, OFFSET, COUNT, TILE, fill=FILL)


def _set(*changes):
    def change(meta):
        for index, value in changes:
            meta[index] = value
    return change


BREAKS = [
    ("foreign route not -1", _set((E2P + 0, 2)), "a route of another rank's expert is not mapped to -1"),
    ("two routes on one row", _set((E2P + 5, 0)), "are not distinct rows"),
    ("row holds another token", _set((ROW + 0, 1)), "a local route's row does not hold its token"),
    ("padding row holds a token", _set((ROW + 2, 0)), "a row no local route maps to is not padding"),
    ("padded_tokens inconsistent", _set((META_PADDED_TOKENS, 13)), "are inconsistent for tile 3"),
    ("one CTA too many", _set((META_NUM_CTAS, 5), (META_PADDED_TOKENS, 15), (META_CTA_BATCH + 4, 3),
                              (META_CTA_LIMIT + 4, 13), (ROW + 12, -1), (ROW + 13, -1), (ROW + 14, -1)),
     "num_ctas 5"),
    ("CTA batches out of order", _set((META_CTA_BATCH + 0, 1), (META_CTA_BATCH + 1, 0)),
     "is not a non-decreasing list"),
    ("an empty CTA", _set((META_CTA_LIMIT + 0, 0)), "leaves a CTA empty"),
    ("a limit past the routes", _set((META_CTA_LIMIT + 0, 3)), "rows below its limit 3"),
    ("tokens out of order", _set((E2P + 4, 1), (E2P + 8, 0), (ROW + 0, 1), (ROW + 1, 0)),
     "tokens not in increasing token order"),
    ("an expert continued in a part-filled CTA", _set((META_CTA_BATCH + 3, 2)),
     "a CTA is not full though its expert continues"),
    ("CTAs 2 and 3 hold each other's routes", _set((E2P + 6, 9), (E2P + 10, 10), (E2P + 7, 6), (E2P + 11, 7)),
     "CTA 2: holds routes of other experts than local expert 2"),
    ("the guard written", _set((-1, 0)), "rows past padded_tokens and the guard is written"),
    ("an entry past the routes written", _set((E2P + 16, -1)), "expanded_to_permuted past 8b routes is written"),
]


def test_the_real_metadata_keeps_every_invariant():
    assert metadata_violations(IDS, OFFSET, COUNT, TILE, _real(), FILL) == []


@pytest.mark.parametrize("change,wanted", [b[1:] for b in BREAKS], ids=[b[0] for b in BREAKS])
def test_a_hand_made_break_is_reported(change, wanted):
    meta = _real()
    change(meta)
    found = metadata_violations(IDS, OFFSET, COUNT, TILE, meta, FILL)
    assert any(wanted in line for line in found), found


def test_metadata_of_another_size_is_reported():
    assert metadata_violations(IDS, OFFSET, COUNT, TILE, _real()[:-1], FILL)[0].startswith("metadata has shape")
