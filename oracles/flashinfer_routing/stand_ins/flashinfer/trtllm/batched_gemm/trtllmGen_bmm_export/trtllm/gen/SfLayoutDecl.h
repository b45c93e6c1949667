// Project stand-in for the trtllm-gen header the FlashInfer wheel does not ship: the routing headers
// only name the scale-factor layout type in structs the routing kernel does not use.
#pragma once

namespace batchedGemm::trtllm::gen {
enum class SfLayout { Linear };
}  // namespace batchedGemm::trtllm::gen
