"""Shapes of the routing problem and the int32 metadata layout the kernel writes.

Imports nothing but the standard library, so the NumPy model, the FlashInfer oracle's conversion and the
CuTe kernel share one definition without a GPU or the CUTLASS DSL.

The metadata vector (int32), for a GEMM tile of ``tile_n`` rows:

    [META_PADDED_TOKENS]                       padded token count = total CTAs * tile_n
    [META_NUM_CTAS]                            total CTA count
    [META_EXPANDED_TO_PERMUTED + r]            route r = token * TOP_K + k -> permuted row, -1 if the
                                               expert is another rank's (ROUTES entries, 8b written)
    [META_CTA_BATCH + i]                       CTA i -> local expert index (MAX_CTAS entries)
    [META_CTA_LIMIT + i]                       CTA i -> one past its last valid permuted row
    [META_PERMUTED_TO_TOKEN + row]             permuted row -> token id, -1 in padding rows
                                               (MAX_CTAS * tile_n entries, 16-byte aligned)
    [metadata_size(tile_n) - 1]                guard, never written
"""

EXPERTS = 256
TOP_K = 8
MAX_TOKENS = 8
ROUTES = MAX_TOKENS * TOP_K
# One warp routes one token row: lane l holds experts l * EXPERTS_PER_LANE .. (l + 1) * EXPERTS_PER_LANE - 1.
WARP = 32
EXPERTS_PER_LANE = EXPERTS // WARP
MAX_TILE = 256
# Every CTA holds at least one route, so there are never more CTAs than routes.
MAX_CTAS = ROUTES

META_PADDED_TOKENS = 0
META_NUM_CTAS = 1
META_EXPANDED_TO_PERMUTED = 2
META_CTA_BATCH = META_EXPANDED_TO_PERMUTED + ROUTES
META_CTA_LIMIT = META_CTA_BATCH + MAX_CTAS
# Rounded up to a multiple of 4 so that the permuted rows start on a 16-byte boundary.
META_PERMUTED_TO_TOKEN = (META_CTA_LIMIT + MAX_CTAS + 3) // 4 * 4


def metadata_size(tile_n: int) -> int:
    """Elements of the metadata vector for tile ``tile_n`` (1..MAX_TILE), the guard element included."""
    if isinstance(tile_n, bool) or not isinstance(tile_n, int) or not 1 <= tile_n <= MAX_TILE:
        raise ValueError(f"tile_n must be an int in [1, {MAX_TILE}], got {tile_n!r}")
    return META_PERMUTED_TO_TOKEN + MAX_CTAS * tile_n + 1


def metadata_field(index: int, tile_n: int) -> str:
    """Name of metadata element ``index`` for tile ``tile_n``, e.g. 'cta_limit[3]', for mismatch reports."""
    fields = [(META_PADDED_TOKENS, 1, "padded_tokens"), (META_NUM_CTAS, 1, "num_ctas"),
              (META_EXPANDED_TO_PERMUTED, ROUTES, "expanded_to_permuted"),
              (META_CTA_BATCH, MAX_CTAS, "cta_batch"), (META_CTA_LIMIT, MAX_CTAS, "cta_limit"),
              (META_PERMUTED_TO_TOKEN, MAX_CTAS * tile_n, "permuted_to_token")]
    for start, length, name in fields:
        if start <= index < start + length:
            return f"{name}[{index - start}]"
    return "guard" if index == metadata_size(tile_n) - 1 else f"unused[{index}]"


# The launch's device facts: the logits row stride's granule (16-byte rows) and the 16-byte alignment of logits,
# bias and metadata, which the contract holds arguments to and the kernel assumes.
VECTOR_WORDS = 4
TENSOR_ALIGN = 16
