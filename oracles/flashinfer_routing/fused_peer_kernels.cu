// The peer library's kernel translation unit: FlashInfer's BLOCK_GROUP unit of the custom routing
// (routingIndicesBlockKernel, routingIndicesDynBlockKernel and their launchers), as its own
// trtllm_fused_moe_routing_custom_block.cu builds it, with the dispatch narrowed by fused_peer_narrow.cuh.

#include "fused_peer_narrow.cuh"

#define FLASHINFER_ROUTING_CUSTOM_BLOCK_GROUP
#include "trtllm_fused_moe_routing_custom.cuh"
