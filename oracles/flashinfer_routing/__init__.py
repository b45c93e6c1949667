"""FlashInfer's routingIndicesDynBlockKernel, built from the installed flashinfer-python sources, as the
oracle for the routing metadata. ``make flashinfer-oracle`` builds the library; ``dyn_block`` runs it. The same
build makes FlashInfer's fused routing from logits, the benchmark's peer (``fused_peer``)."""

from oracles.flashinfer_routing.dyn_block import (
    DEFAULT_POISON,
    WEIGHT_POISON_BITS,
    DynBlockMetadata,
    FlashInferOracleError,
    dyn_block_metadata,
    load_library,
    to_meta,
)

__all__ = ["DEFAULT_POISON", "WEIGHT_POISON_BITS", "DynBlockMetadata", "FlashInferOracleError",
           "dyn_block_metadata", "load_library", "to_meta"]
