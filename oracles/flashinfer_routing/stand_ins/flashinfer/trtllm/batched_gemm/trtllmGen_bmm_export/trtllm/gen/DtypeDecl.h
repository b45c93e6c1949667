// Project stand-in for the trtllm-gen header the FlashInfer wheel does not ship: it declares the dtype
// enum. The routing headers compare against these names only; the values are this library's own.
#pragma once

namespace batchedGemm::trtllm::gen {
enum class Dtype { Bfloat16, E4m3, Fp16, Fp32 };
}  // namespace batchedGemm::trtllm::gen
