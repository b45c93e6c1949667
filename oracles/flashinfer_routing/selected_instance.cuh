// Whether FlashInfer's full LAUNCH_ROUTING_CUSTOM dispatch would launch the one instance a narrowed build
// compiles: the policy pair (PreProc, PostProc), the tier (kExperts, kTopK) and FP32 outputs, decided by
// FlashInfer's own dispatch predicates (dispatchRoutingPolicy, dispatchTierPairs over PolicyTraits, the
// mDtypeOutput test of LAUNCH_ROUTING_WITH_POLICIES). Shared by the dyn-block oracle and the fused peer.

#pragma once

#include <type_traits>

#include "flashinfer/trtllm/fused_moe/RoutingCustomPolicy.cuh"

namespace fi_narrow {

template <typename PreProc, typename PostProc, int kExperts, int kTopK>
inline bool dispatchSelects(moe::dev::routing::routingCustom::Data const& data) {
  namespace custom = moe::dev::routing::routingCustom;
  bool selected = false;
  custom::dispatchRoutingPolicy(data, [&](auto preProc, auto postProc, char const* /*policyName*/) {
    using Pairs = typename custom::PolicyTraits<decltype(preProc), decltype(postProc)>::Pairs;
    custom::dispatchTierPairs(static_cast<Pairs*>(nullptr), data, [&](auto eTag, auto kTag) {
      selected = std::is_same_v<decltype(preProc), PreProc> &&
                 std::is_same_v<decltype(postProc), PostProc> && decltype(eTag)::value == kExperts &&
                 decltype(kTag)::value == kTopK;
    });
  });
  return selected && data.mDtypeOutput == moe::dev::routing::tg::Dtype::Fp32;
}

}  // namespace fi_narrow
