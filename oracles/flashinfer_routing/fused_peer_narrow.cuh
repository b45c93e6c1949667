// FlashInfer's routingCustom dispatch narrowed to the one instance its routing runner selects for
// sigmoid + bias, top 8 of 256 experts, one expert group, FP32 logits and weights. Included first by both
// translation units of the peer library (fused_peer_kernels.cu, fused_peer.cu), before FlashInfer's
// trtllm_fused_moe_routing_custom.cuh, so that its launch macros expand to:
//
//  - routingIndicesBlockKernel and routingIndicesDynBlockKernel: launched exactly as FlashInfer launches
//    them, for the compiled instance only, once FlashInfer's own dispatch predicates (dispatchRoutingPolicy,
//    dispatchTierPairs over PolicyTraits, the mDtypeOutput test of LAUNCH_ROUTING_WITH_POLICIES) confirm
//    that the full dispatch would launch that same instance;
//  - every other launch (another policy, tier or dtype; the cluster, histogram, block-scores, cooperative
//    and offsets kernels of the larger batches): nothing launched, the path recorded, so that the entry
//    point reports an error instead of returning outputs FlashInfer never wrote.
//
// Without this, LAUNCH_ROUTING_CUSTOM instantiates every routing policy, expert tier and dtype (tens of
// minutes of nvcc); with it the library holds two kernels.

#pragma once

#include <sstream>
#include <stdexcept>

#include "flashinfer/trtllm/fused_moe/RoutingCustomPolicy.cuh"

#include "selected_instance.cuh"

// FlashInfer's TVM-FFI checks (tvm_ffi_utils.h is a project stand-in without them): a failed check throws
// std::runtime_error with the streamed message, as TVM-FFI's check throws its own error type.
namespace fi_peer {
class CheckFailure {
 public:
  explicit CheckFailure(char const* condition) { mText << "Check failed: " << condition << ": "; }
  ~CheckFailure() noexcept(false) { throw std::runtime_error(mText.str()); }
  template <typename T>
  CheckFailure& operator<<(T const& value) {
    mText << value;
    return *this;
  }

 private:
  std::ostringstream mText;
};
}  // namespace fi_peer

#ifndef TVM_FFI_ICHECK
#define TVM_FFI_ICHECK(cond) \
  if (cond) {                \
  } else                     \
    ::fi_peer::CheckFailure(#cond)
#define TVM_FFI_ICHECK_LE(a, b) TVM_FFI_ICHECK((a) <= (b))
#define TVM_FFI_LOG_AND_THROW(kind) ::fi_peer::CheckFailure(#kind)
#endif

namespace fi_peer {

namespace routing = moe::dev::routing;
namespace custom = moe::dev::routing::routingCustom;

// The instance compiled into this library: the policy pair FlashInfer's dispatchRoutingPolicy maps
// RoutingPreprocessType::SigmoidBias to, the first PolicyTraits tier covering 256 experts and top 8, and
// FP32 weights (LAUNCH_ROUTING_WITH_POLICIES's Fp32 branch: KernelParams<float, float, ...>).
using PreProc = routing::SigmoidBiasPreprocess;
using PostProc = routing::ScaledSumNormalizePostprocess;
constexpr int kTierExperts = 256;
constexpr int kTierTopK = 8;

// Launches made through the narrowed dispatch since the last reset, and the first path reached that
// this library does not hold.
inline int gBlockLaunches = 0;
inline int gDynBlockLaunches = 0;
inline int gUncompiled = 0;
inline char const* gUncompiledWhat = nullptr;

inline void resetLaunches() {
  gBlockLaunches = gDynBlockLaunches = gUncompiled = 0;
  gUncompiledWhat = nullptr;
}

inline void uncompiled(char const* what) {
  if (gUncompiled++ == 0) gUncompiledWhat = what;
}

// True when FlashInfer's full LAUNCH_ROUTING_CUSTOM dispatch would launch the instance compiled here.
inline bool dispatchSelectsCompiledInstance(custom::Data const& data) {
  return fi_narrow::dispatchSelects<PreProc, PostProc, kTierExperts, kTierTopK>(data);
}

}  // namespace fi_peer

// The post-top-K pipeline lives in FlashInfer's routing_common.cu, not built here: run() reaches it only
// on the block-per-token split path, which its dispatch never takes for <= 16 tokens. fused_peer.cu
// defines this specialization to record that path and launch nothing.
namespace moe::dev::routing {
template <>
void runPostTopKPipeline<routingCustom::Data>(routingCustom::Data const& data, void* stream);
}  // namespace moe::dev::routing

#undef LAUNCH_ROUTING_CUSTOM
#define LAUNCH_ROUTING_CUSTOM(data, coopLaunch, kernel, numBlocks, numThreads, smemSize, stream) \
  FI_PEER_LAUNCH_##kernel(data, coopLaunch, kernel, numBlocks, numThreads, smemSize, stream)
#define FI_PEER_LAUNCH_routingIndicesBlockKernel(...) \
  FI_PEER_LAUNCH_COMPILED(::fi_peer::gBlockLaunches, __VA_ARGS__)
#define FI_PEER_LAUNCH_routingIndicesDynBlockKernel(...) \
  FI_PEER_LAUNCH_COMPILED(::fi_peer::gDynBlockLaunches, __VA_ARGS__)
// LAUNCH_ROUTING_CUSTOM_WITH_CONFIG's body for the one compiled instance (DefaultRoutingLaunchConfig).
#define FI_PEER_LAUNCH_COMPILED(counter, data, coopLaunch, kernel, numBlocks, numThreads, smemSize,  \
                                stream)                                                             \
  if (::fi_peer::dispatchSelectsCompiledInstance(data)) {                                           \
    using LaunchConfig_ =                                                                           \
        DefaultRoutingLaunchConfig<::fi_peer::kTierExperts, ::fi_peer::kTierTopK>;                  \
    int const effectiveThreads_ = LaunchConfig_::blockDim(data, static_cast<int>(numThreads));     \
    int const effectiveBlocks_ =                                                                    \
        LaunchConfig_::gridDim(data, static_cast<int>(numBlocks), effectiveThreads_);              \
    LAUNCH_PDL_ROUTING(data, coopLaunch,                                                            \
                       LAUNCH_ESC(float, float, ::fi_peer::kTierExperts, ::fi_peer::kTierTopK,     \
                                  TopKExpertSelect<::fi_peer::PreProc, ::fi_peer::PostProc>),      \
                       kernel, effectiveBlocks_, effectiveThreads_, smemSize, stream);              \
    ++counter;                                                                                      \
  } else {                                                                                          \
    ::fi_peer::uncompiled(#kernel " for another policy, tier or dtype");                            \
  }
// Every launch through the per-policy macro (histogram-scores, block-scores, cooperative kernels) and the
// policy-free one (init-counts, histogram, offsets kernels): not compiled here.
#undef LAUNCH_ROUTING_WITH_POLICIES
#define LAUNCH_ROUTING_WITH_POLICIES(data, coopLaunch, kernel, ...) ::fi_peer::uncompiled(#kernel)
#undef LAUNCH_ROUTING_CUSTOM_NO_POLICY
#define LAUNCH_ROUTING_CUSTOM_NO_POLICY(data, coopLaunch, kernel, ...) ::fi_peer::uncompiled(#kernel)
