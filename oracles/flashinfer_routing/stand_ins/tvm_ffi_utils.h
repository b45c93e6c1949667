// Project stand-in: trtllm_fused_moe_routing_custom.cuh includes FlashInfer's TVM-FFI glue; the real header
// needs the TVM-FFI package and DLPack. The dyn-block oracle does not build the routing entry point that uses
// it; the fused peer does, with the three checks it needs defined in fused_peer_narrow.cuh.
#pragma once
