"""The poison every output buffer starts from, so that an element an implementation leaves untouched is
compared too. Every implementation and every buffer of the harness uses these values."""

from oracles.flashinfer_routing import DEFAULT_POISON, WEIGHT_POISON_BITS

IDS_POISON = 0x7F7F7F7F
# The model's fill and FlashInfer's poison; every writer writes values >= -1 there.
METADATA_POISON = DEFAULT_POISON
# Elements past metadata_size(tile_n) in the kernel's metadata buffer that must stay untouched.
METADATA_SLACK = 36
