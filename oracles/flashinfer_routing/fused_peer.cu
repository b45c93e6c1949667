// FlashInfer's fused routing from logits, the peer a user would pick instead of the CuTe kernel, built
// from the installed flashinfer-python package's own sources (nothing of FlashInfer is copied here).
//
// What FlashInfer's routing runner calls. Routing::Runner::run (csrc/fused_moe/trtllm_backend/
// trtllm_fused_moe_routing_runner.cu), for RoutingMethodType::DeepSeekV3 with nGroup <= 1 (one expert
// group, topk_group 1), does not call routingDeepSeek: it fills a routingCustom::Data with
// RoutingPreprocessType::SigmoidBias and RoutingPostprocessType::ScaledSumNormalize (sigmoid(logit) + bias
// selects the top K, the un-biased sigmoids are renormalized: w = s * routeScale / (sum + 1e-20)) and calls
// routingCustom::run. fi_fused_routing_enqueue fills the Data field by field as that branch does and calls
// the same routingCustom::run. Where it differs from the runner, and why:
//  - mDtypeOutput = Fp32, not the runner's hard-coded Bfloat16: FP32 weights, comparable with the model's
//    (LAUNCH_ROUTING_WITH_POLICIES compiles the Fp32 branch as KernelParams<float, float, ...>);
//  - mPtrRoutingReplayOut = the caller's int16 ids: the runner's routing_replay_out argument. From logits
//    the block kernels write no ids anywhere else (mPtrTopKIds is an input, mPtrTopKPacked is read, not
//    written, on this path), and the replay output is FlashInfer's own record of the selected experts;
//  - mPtrPermutedIdxToExpandedIdx = nullptr, as FlashInfer's standalone routing entry
//    (trtllm_fused_moe_routing_binding.cu) passes it.
// Logits and bias are FP32 (mDtypeInput = mDtypeBias = Fp32; the runner takes FP32 or BF16 logits).
//
// Which kernel. For 256 experts and top 8 the SigmoidBias tier is Tier<256, 8>; run() launches
// routingIndicesBlockKernel for numTokens <= BlockKernelMaxNumTokens (4) and routingIndicesDynBlockKernel
// for 5..DynBlockKernelMaxNumTokens (16) (dispatched max experts 256 <= DynBlockKernelMaxNumExperts), one
// launch either way, metadata included. The entry reports which one it launched.
//
// Build: this translation unit is FlashInfer's ENTRY unit of the custom routing (run() and the launchers
// of the larger batches), fused_peer_kernels.cu its BLOCK_GROUP unit; both narrowed by
// fused_peer_narrow.cuh to the one kernel instance above. The cluster kernels and the post-top-K pipeline,
// which FlashInfer builds in other units, are stubs below: reaching one is an error, never a silent skip.

#include <cstdint>
#include <cstdio>
#include <exception>

#include "fused_peer_narrow.cuh"

#define FLASHINFER_ROUTING_CUSTOM_ENTRY
#include "trtllm_fused_moe_routing_custom.cuh"

namespace moe::dev::routing {
namespace routingCustom {
// FlashInfer's cluster units (trtllm_fused_moe_routing_custom_cluster*.cu), not built here.
bool launchClusterKernelBlockDim256(Data const& /*data*/, void* /*stream*/) {
  ::fi_peer::uncompiled("routingIndicesClusterKernel (256 threads)");
  return false;
}
bool launchClusterKernelBlockDim512(Data const& /*data*/, void* /*stream*/) {
  ::fi_peer::uncompiled("routingIndicesClusterKernel (512 threads)");
  return false;
}
bool launchClusterKernelBlockDim1024(Data const& /*data*/, void* /*stream*/) {
  ::fi_peer::uncompiled("routingIndicesClusterKernel (1024 threads)");
  return false;
}
}  // namespace routingCustom

template <>
void runPostTopKPipeline<routingCustom::Data>(routingCustom::Data const& /*data*/, void* /*stream*/) {
  ::fi_peer::uncompiled("runPostTopKPipeline");
}
}  // namespace moe::dev::routing

namespace fi_peer {

enum Status : int { kOk = 0, kBadArgument = 1, kCudaError = 2, kNotLaunched = 3, kException = 4 };
// Which kernel a call launched (the entry's kernelOut).
enum Launched : int32_t { kNoKernel = 0, kBlockKernel = 1, kDynBlockKernel = 2 };

void writeMessage(char* message, int32_t capacity, char const* text) {
  if (message != nullptr && capacity > 0) std::snprintf(message, capacity, "%s", text);
}

// The runner's computeLog2: log2 of a power-of-two tile, else -1.
int32_t computeLog2(int32_t val) {
  int32_t n = val;
  int32_t out = 0;
  while (n >>= 1) ++out;
  return (1 << out) == val ? out : -1;
}

// The caller's device buffers of one launch.
struct Buffers {
  float const* logits;        // [numTokens, numExperts]
  float const* bias;          // [numExperts]
  float* weights;             // [numTokens, topK]
  int16_t* ids;               // [numTokens, topK]: the runner's routing_replay_out
  int32_t* topKPacked;        // [numTokens, topK]: the runner's routingExpertIndexes (scratch)
  int32_t* expertCounts;      // [max(2 * numExperts, 512)]: the runner's expertCountHistogram (scratch)
  int32_t* expandedToPermuted;
  int32_t* ctaBatch;
  int32_t* ctaLimit;
  int32_t* permutedToToken;
  int32_t* scalars;           // [permuted_idx_size, num_non_exiting_ctas]
};

// Routing::Runner::run's DeepSeekV3 nGroup <= 1 branch, field by field in its order; the differences are
// named in the header comment.
custom::Data runnerData(Buffers const& b, int32_t numTokens, int32_t numExperts, int32_t topK,
                        float routedScalingFactor, int32_t localExpertOffset,
                        int32_t localNumExperts, int32_t tileTokensDim, bool enablePdl) {
  custom::Data routingData;
  routingData.mDtypeOutput = routing::tg::Dtype::Fp32;  // runner: Bfloat16
  routingData.mDtypeInput = routing::tg::Dtype::Fp32;   // dtypeLogits
  routingData.mUsePdl = enablePdl;
  routingData.mPreprocessType = routing::RoutingPreprocessType::SigmoidBias;
  routingData.mPostprocessType = routing::RoutingPostprocessType::ScaledSumNormalize;
  routingData.mPtrRoutingBias = b.bias;
  routingData.mDtypeBias = routing::tg::Dtype::Fp32;
  routingData.mRouteScale = routedScalingFactor;
  routingData.mSumEpsilon = 1e-20f;

  routingData.mPtrScores = b.logits;  // expertIds == nullptr: routing from logits
  routingData.mPtrTopKIds = nullptr;
  routingData.mPtrTopKPacked = b.topKPacked;
  routingData.mPtrExpertCounts = b.expertCounts;
  routingData.mPtrPermutedIdxSize = b.scalars;
  routingData.mPtrExpandedIdxToPermutedIdx = b.expandedToPermuted;
  routingData.mPtrPermutedIdxToExpandedIdx = nullptr;
  routingData.mPtrPermutedIdxToTokenIdx = b.permutedToToken;
  routingData.mPtrTopKWeights = b.weights;

  routingData.mPtrCtaIdxXyToBatchIdx = b.ctaBatch;
  routingData.mPtrCtaIdxXyToMnLimit = b.ctaLimit;
  routingData.mPtrNumNonExitingCtas = b.scalars + 1;

  routingData.mNumTokens = numTokens;
  routingData.mNumExperts = numExperts;
  routingData.mTopK = topK;
  routingData.mPaddingLog2 = computeLog2(tileTokensDim);
  routingData.mTileTokensDim = tileTokensDim;
  routingData.mLocalExpertsStartIdx = localExpertOffset;
  routingData.mLocalExpertsStrideLog2 = 0;
  routingData.mNumLocalExperts = localNumExperts;
  routingData.mPtrRoutingReplayOut = b.ids;  // runner: routing_replay_out
  return routingData;
}

bool argumentsOk(Buffers const& b, int32_t numTokens, int32_t numExperts, int32_t topK,
                 int32_t localExpertOffset, int32_t localNumExperts, int32_t tileN) {
  bool const pointers = b.logits && b.bias && b.weights && b.ids && b.topKPacked && b.expertCounts &&
                        b.expandedToPermuted && b.ctaBatch && b.ctaLimit && b.permutedToToken &&
                        b.scalars;
  // The bounds FlashInfer's standalone routing entry checks (trtllm_fused_moe_routing_binding.cu).
  return pointers && numTokens >= 1 && numTokens <= custom::DynBlockKernelMaxNumTokens && topK >= 1 &&
         topK <= numExperts && localNumExperts >= 1 && localExpertOffset >= 0 &&
         localExpertOffset + localNumExperts <= numExperts && tileN >= 1 && (tileN & (tileN - 1)) == 0;
}

}  // namespace fi_peer

// Enqueues FlashInfer's routingCustom::run on `stream` (a cudaStream_t of the current device) for FP32
// logits [numTokens, numExperts] and FP32 bias [numExperts] on the device, as its routing runner does for
// DeepSeekV3 routing with one expert group, and returns without waiting. Outputs (device): FP32 weights and
// int16 ids [numTokens, topK]; the metadata buffers sized as for fi_dyn_block_metadata (scalars: 2
// elements); topKPacked [numTokens, topK] and expertCounts [max(2 * numExperts, 512)] are the runner's
// scratch. With usePdl nonzero the launch allows programmatic dependent launch (mUsePdl). Returns 0 once
// exactly one kernel of this library was launched without error (*kernelOut: 1 routingIndicesBlockKernel,
// 2 routingIndicesDynBlockKernel), else a nonzero status with a message. Writes nothing on the host but
// kernelOut and the message.
extern "C" int fi_fused_routing_enqueue(
    float const* logits, float const* bias, int32_t numTokens, int32_t numExperts, int32_t topK,
    float routedScalingFactor, int32_t localExpertOffset, int32_t localNumExperts, int32_t tileN,
    float* weights, int16_t* ids, int32_t* topKPacked, int32_t* expertCounts,
    int32_t* expandedToPermuted, int32_t* ctaBatch, int32_t* ctaLimit, int32_t* permutedToToken,
    int32_t* scalars, void* stream, int32_t usePdl, int32_t* kernelOut, char* message,
    int32_t messageCapacity) {
  using namespace fi_peer;
  if (kernelOut != nullptr) *kernelOut = kNoKernel;
  Buffers const buffers{logits,     bias,     weights,  ids,       topKPacked,      expertCounts,
                        expandedToPermuted, ctaBatch, ctaLimit, permutedToToken, scalars};
  if (kernelOut == nullptr || !argumentsOk(buffers, numTokens, numExperts, topK, localExpertOffset,
                                           localNumExperts, tileN)) {
    writeMessage(message, messageCapacity,
                 "bad arguments: need 1 <= numTokens <= DynBlockKernelMaxNumTokens, 1 <= topK <= "
                 "numExperts, 1 <= localNumExperts, 0 <= localExpertOffset, localExpertOffset + "
                 "localNumExperts <= numExperts, a power-of-two tileN and non-null buffers");
    return kBadArgument;
  }
  try {
    custom::Data const data =
        runnerData(buffers, numTokens, numExperts, topK, routedScalingFactor, localExpertOffset,
                   localNumExperts, tileN, usePdl != 0);
    resetLaunches();
    custom::run(data, stream);
    cudaError_t const err = cudaGetLastError();
    if (err != cudaSuccess) {
      char text[512];
      std::snprintf(text, sizeof(text), "launching routingCustom::run: %s (%s)", cudaGetErrorName(err),
                    cudaGetErrorString(err));
      writeMessage(message, messageCapacity, text);
      return kCudaError;
    }
  } catch (std::exception const& e) {
    char text[1024];
    std::snprintf(text, sizeof(text), "routingCustom::run threw: %s%s%s", e.what(),
                  gUncompiled ? "; path not compiled into this library: " : "",
                  gUncompiled ? gUncompiledWhat : "");
    writeMessage(message, messageCapacity, text);
    return kException;
  }
  if (gUncompiled != 0 || gBlockLaunches + gDynBlockLaunches != 1) {
    char text[512];
    std::snprintf(text, sizeof(text),
                  "routingCustom::run made %d block and %d dyn-block launches and reached %d paths not "
                  "compiled into this library (first: %s): FlashInfer's dispatch does not select the "
                  "one instance compiled here for this configuration",
                  gBlockLaunches, gDynBlockLaunches, gUncompiled,
                  gUncompiledWhat ? gUncompiledWhat : "none");
    writeMessage(message, messageCapacity, text);
    return kNotLaunched;
  }
  *kernelOut = gBlockLaunches == 1 ? kBlockKernel : kDynBlockKernel;
  return kOk;
}
