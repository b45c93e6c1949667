// Project stand-in: trtllm_fused_moe_routing_custom.cuh includes FlashInfer's TVM-FFI glue, which only
// its entry point (not built here) uses; the real header needs the TVM-FFI package and DLPack.
#pragma once
