"""Invariants any correct routing metadata satisfies, stated from the layout (kernel/layout.py) alone.

Independent of every implementation's construction: the permutation is a bijection between the local
routes and the non-padding rows, each row holds its route's token, CTAs are consistent with their limits
and batch indices, padding rows are -1, and every element past the written sizes keeps the fill.
"""

import numpy as np

from kernel.layout import (
    MAX_CTAS,
    META_CTA_BATCH,
    META_CTA_LIMIT,
    META_EXPANDED_TO_PERMUTED,
    META_NUM_CTAS,
    META_PADDED_TOKENS,
    META_PERMUTED_TO_TOKEN,
    ROUTES,
    TOP_K,
    metadata_size,
)

PADDING = -1


def _ctas(meta, tile, routes, local, offset, count):
    """Violations of the CTA fields, given the sizes are sane."""
    found = []
    num_ctas = int(meta[META_NUM_CTAS])
    batch = meta[META_CTA_BATCH:META_CTA_BATCH + num_ctas]
    limit = meta[META_CTA_LIMIT:META_CTA_LIMIT + num_ctas]
    token_of_row = meta[META_PERMUTED_TO_TOKEN:META_PERMUTED_TO_TOKEN + num_ctas * tile]
    counts = np.bincount(routes[local] - offset, minlength=count)
    if num_ctas != int(np.sum(-(-counts // tile))):
        found.append(f"num_ctas {num_ctas}: the local experts' route counts {counts[counts > 0].tolist()} need "
                     f"{int(np.sum(-(-counts // tile)))} CTAs of {tile}")
    if ((batch < 0) | (batch >= count)).any() or (np.diff(batch) < 0).any():
        found.append(f"cta_batch {batch.tolist()} is not a non-decreasing list of local experts < {count}")
        return found
    starts = np.arange(num_ctas) * tile
    if ((limit <= starts) | (limit > starts + tile)).any():
        found.append(f"cta_limit {limit.tolist()} leaves a CTA empty or past its {tile} rows")
        return found
    continued = batch[1:] == batch[:-1]
    if (limit[:-1][continued] != starts[:-1][continued] + tile).any():
        found.append("a CTA is not full though its expert continues in the next CTA")
    row_route = np.full(num_ctas * tile, -1)
    e2p = meta[META_EXPANDED_TO_PERMUTED:META_EXPANDED_TO_PERMUTED + routes.size]
    row_route[e2p[local]] = np.flatnonzero(local)
    for i in range(num_ctas):
        rows = np.arange(starts[i], starts[i] + tile)
        valid = rows < limit[i]
        if (row_route[rows[valid]] < 0).any() or (row_route[rows[~valid]] >= 0).any():
            found.append(f"CTA {i}: rows below its limit {limit[i]} are not exactly its routes' rows")
        elif (routes[row_route[rows[valid]]] != offset + batch[i]).any():
            found.append(f"CTA {i}: holds routes of other experts than local expert {batch[i]}")
        elif (np.diff(token_of_row[rows[valid]]) <= 0).any() or (
                i > 0 and batch[i - 1] == batch[i] and token_of_row[rows[0] - 1] >= token_of_row[rows[0]]):
            found.append(f"CTA {i}: tokens not in increasing token order")
    return found


def metadata_violations(ids, offset, count, tile, meta, fill):
    """Descriptions of every invariant ``meta`` breaks (empty when it holds them all) for expert ids int32
    [b, 8], local experts [offset, offset + count), tile ``tile`` and ``fill`` in unwritten elements."""
    if meta.shape != (metadata_size(tile),):
        return [f"metadata has shape {meta.shape}, not ({metadata_size(tile)},)"]
    routes = ids.reshape(-1).astype(np.int64)
    local = (routes >= offset) & (routes < offset + count)
    padded, num_ctas = int(meta[META_PADDED_TOKENS]), int(meta[META_NUM_CTAS])
    if not 0 <= num_ctas <= MAX_CTAS or padded != num_ctas * tile:
        return [f"padded_tokens {padded} and num_ctas {num_ctas} are inconsistent for tile {tile}"]
    found = []
    e2p = meta[META_EXPANDED_TO_PERMUTED:META_EXPANDED_TO_PERMUTED + routes.size]
    token_of_row = meta[META_PERMUTED_TO_TOKEN:META_PERMUTED_TO_TOKEN + padded]
    if (e2p[~local] != PADDING).any():
        found.append("a route of another rank's expert is not mapped to -1")
    rows = e2p[local]
    if ((rows < 0) | (rows >= padded)).any() or np.unique(rows).size != rows.size:
        return found + [f"the local routes' rows {rows.tolist()} are not distinct rows below {padded}"]
    if (token_of_row[rows] != np.flatnonzero(local) // TOP_K).any():
        found.append("a local route's row does not hold its token")
    padding_rows = np.setdiff1d(np.arange(padded), rows)
    if (token_of_row[padding_rows] != PADDING).any():
        found.append("a row no local route maps to is not padding (-1)")
    found += _ctas(meta, tile, routes, local, offset, count)
    untouched = {"expanded_to_permuted past 8b routes":
                 meta[META_EXPANDED_TO_PERMUTED + routes.size:META_EXPANDED_TO_PERMUTED + ROUTES],
                 "cta_batch past num_ctas": meta[META_CTA_BATCH + num_ctas:META_CTA_BATCH + MAX_CTAS],
                 "cta_limit past num_ctas": meta[META_CTA_LIMIT + num_ctas:META_CTA_LIMIT + MAX_CTAS],
                 "the alignment gap": meta[META_CTA_LIMIT + MAX_CTAS:META_PERMUTED_TO_TOKEN],
                 "rows past padded_tokens and the guard": meta[META_PERMUTED_TO_TOKEN + padded:]}
    found += [f"{name} is written" for name, part in untouched.items() if (part != fill).any()]
    return found
