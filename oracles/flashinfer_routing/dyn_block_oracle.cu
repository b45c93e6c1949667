// FlashInfer's routingIndicesDynBlockKernel as an oracle for the routing metadata, built from the
// installed flashinfer-python package's own sources (nothing of FlashInfer is copied here).
//
// The C entry point fi_dyn_block_metadata takes top-k expert ids on the host, fills every output buffer
// with a caller-chosen poison value, calls routingCustom::launchDynBlockKernel exactly as FlashInfer's
// runPostTopKPipeline does for precomputed ids, and copies every buffer back, so that elements the
// kernel does not write can be compared too. The ids and the outputs are parts of one device block kept
// between calls: a call is one copy in, one fill, the launch and one copy out (on a GPU that several
// processes share, each further allocation, free or copy is a wait). fi_dyn_block_enqueue makes the same launch on the caller's
// device buffers and stream and returns without waiting (for timing and CUDA graph capture).
//
// Build time: FlashInfer's LAUNCH_ROUTING_CUSTOM instantiates every routing policy, expert tier and
// dtype (minutes of nvcc). It is narrowed here, before the kernel header is read, to the one instance
// that FlashInfer's own dispatch selects for this oracle's configuration; the narrowed macro checks at
// run time, with FlashInfer's own dispatch predicates, that the full dispatch would select that same
// instance, and otherwise launches nothing (which the entry point reports as an error).

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <vector>

#include "flashinfer/trtllm/fused_moe/RoutingCustomPolicy.cuh"

#include "selected_instance.cuh"

namespace fi_oracle {

namespace routing = moe::dev::routing;
namespace custom = moe::dev::routing::routingCustom;

// The instance compiled into this library: the policy pair runPostTopKPipeline sets for precomputed
// ids (its TopKIds branch never calls the policy), FP32 outputs, and the tier covering 256 experts, top 8.
using PreProc = routing::NoOpPreprocess;
using PostProc = routing::SoftmaxPostprocess;
constexpr routing::RoutingPreprocessType kPreprocess = routing::RoutingPreprocessType::None;
constexpr routing::RoutingPostprocessType kPostprocess = routing::RoutingPostprocessType::Softmax;
constexpr int kTierExperts = 256;
constexpr int kTierTopK = 8;

// Launches made through the narrowed dispatch since the last reset.
int gLaunches = 0;

// True when FlashInfer's full LAUNCH_ROUTING_CUSTOM dispatch would launch the instance compiled here.
inline bool dispatchSelectsCompiledInstance(custom::Data const& data) {
  return fi_narrow::dispatchSelects<PreProc, PostProc, kTierExperts, kTierTopK>(data);
}

}  // namespace fi_oracle

// FlashInfer's LAUNCH_ROUTING_CUSTOM with the policy/tier/dtype dispatch replaced by the one instance
// above, for the dyn-block kernel only; the static block kernel the same header defines is not compiled
// (its launcher launches nothing).
#undef LAUNCH_ROUTING_CUSTOM
#define LAUNCH_ROUTING_CUSTOM(data, coopLaunch, kernel, numBlocks, numThreads, smemSize, stream) \
  FI_ORACLE_LAUNCH_##kernel(data, coopLaunch, kernel, numBlocks, numThreads, smemSize, stream)
#define FI_ORACLE_LAUNCH_routingIndicesBlockKernel(...) \
  do {                                                  \
  } while (0)
#define FI_ORACLE_LAUNCH_routingIndicesDynBlockKernel(data, coopLaunch, kernel, numBlocks,           \
                                                      numThreads, smemSize, stream)                  \
  if (::fi_oracle::dispatchSelectsCompiledInstance(data)) {                                          \
    using LaunchConfig_ =                                                                            \
        DefaultRoutingLaunchConfig<::fi_oracle::kTierExperts, ::fi_oracle::kTierTopK>;               \
    int const effectiveThreads_ = LaunchConfig_::blockDim(data, static_cast<int>(numThreads));      \
    int const effectiveBlocks_ =                                                                     \
        LaunchConfig_::gridDim(data, static_cast<int>(numBlocks), effectiveThreads_);               \
    LAUNCH_PDL_ROUTING(data, coopLaunch,                                                             \
                       LAUNCH_ESC(float, float, ::fi_oracle::kTierExperts, ::fi_oracle::kTierTopK,  \
                                  TopKExpertSelect<::fi_oracle::PreProc, ::fi_oracle::PostProc>),   \
                       kernel, effectiveBlocks_, effectiveThreads_, smemSize, stream);               \
    ++::fi_oracle::gLaunches;                                                                        \
  }

#define FLASHINFER_ROUTING_CUSTOM_BLOCK_GROUP
#include "trtllm_fused_moe_routing_custom.cuh"

namespace fi_oracle {

enum Status : int { kOk = 0, kBadArgument = 1, kCudaError = 2, kNotLaunched = 3, kException = 4 };

// One output buffer: the caller's host array and its part of the device block.
struct Buffer {
  int32_t* host;
  int32_t count;
  int32_t* device = nullptr;
};

// Each part of the device block starts on a multiple of this many elements (256 bytes, the alignment
// cudaMalloc gives a buffer of its own).
constexpr int32_t kPartElements = 64;

int32_t partElements(int32_t count) { return (count + kPartElements - 1) / kPartElements * kPartElements; }

// The device block of fi_dyn_block_metadata on each device, grown when a call needs more, kept for the
// process's life (as FlashInfer's own workspace is).
struct Block {
  int32_t* ptr = nullptr;
  size_t count = 0;
};
std::mutex gBlockMutex;
std::map<int, Block> gBlocks;

// At least count elements of the current device's block in *ptr (the caller holds gBlockMutex).
cudaError_t deviceBlock(size_t count, int32_t** ptr) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  Block& block = gBlocks[device];
  if (block.count < count) {
    if (block.ptr != nullptr) cudaFree(block.ptr);
    block = Block{};
    err = cudaMalloc(reinterpret_cast<void**>(&block.ptr), sizeof(int32_t) * count);
    if (err != cudaSuccess) return err;
    block.count = count;
  }
  *ptr = block.ptr;
  return cudaSuccess;
}

// FlashInfer's routing Runner: log2 of a power-of-two tile, else -1 (the kernels then divide).
int32_t paddingLog2(int32_t tileN) {
  int32_t log2 = 0;
  while ((1 << (log2 + 1)) <= tileN) ++log2;
  return (1 << log2) == tileN ? log2 : -1;
}

// Fills count int32 elements at device pointer ptr with value.
__global__ void fillKernel(int32_t* ptr, int32_t count, int32_t value) {
  for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    ptr[i] = value;
  }
}

void writeMessage(char* message, int32_t capacity, char const* text) {
  if (message != nullptr && capacity > 0) std::snprintf(message, capacity, "%s", text);
}

int cudaStatus(cudaError_t err, char const* what, char* message, int32_t capacity) {
  char text[512];
  std::snprintf(text, sizeof(text), "%s: %s (%s)", what, cudaGetErrorName(err),
                cudaGetErrorString(err));
  writeMessage(message, capacity, text);
  return kCudaError;
}

// The six output buffers of one launch (device pointers), in the kernel's Data field order.
struct Outputs {
  int32_t* expandedToPermuted;
  int32_t* ctaBatch;
  int32_t* ctaLimit;
  int32_t* permutedToToken;
  int32_t* permutedIdxSize;
  int32_t* numNonExitingCtas;
};

// runPostTopKPipeline's Data for precomputed device ids [numTokens, topK].
custom::Data precomputedIdsData(int32_t* deviceIds, int32_t numTokens, int32_t numExperts,
                                int32_t topK, int32_t localExpertOffset, int32_t numLocalExperts,
                                int32_t tileN, Outputs const& out, bool usePdl) {
  custom::Data data;
  data.mUsePdl = usePdl;
  data.mPtrTopKIds = deviceIds;
  data.mPtrExpandedIdxToPermutedIdx = out.expandedToPermuted;
  data.mPtrCtaIdxXyToBatchIdx = out.ctaBatch;
  data.mPtrCtaIdxXyToMnLimit = out.ctaLimit;
  data.mPtrPermutedIdxToTokenIdx = out.permutedToToken;
  data.mPtrPermutedIdxSize = out.permutedIdxSize;
  data.mPtrNumNonExitingCtas = out.numNonExitingCtas;
  data.mNumTokens = numTokens;
  data.mNumExperts = numExperts;
  data.mTopK = topK;
  data.mTileTokensDim = tileN;
  data.mPaddingLog2 = paddingLog2(tileN);
  data.mLocalExpertsStartIdx = localExpertOffset;
  data.mLocalExpertsStrideLog2 = 0;
  data.mNumLocalExperts = numLocalExperts;
  // runPostTopKPipeline's settings for precomputed ids.
  data.mDtypeOutput = routing::tg::Dtype::Fp32;
  data.mDtypeInput = data.mDtypeOutput;
  data.mPreprocessType = kPreprocess;
  data.mPostprocessType = kPostprocess;
  return data;
}

// launchDynBlockKernel on stream, as runPostTopKPipeline calls it; kOk once exactly one kernel was
// launched without a launch error, else a status and message.
int launchDynBlock(custom::Data const& data, cudaStream_t stream, char* message,
                   int32_t messageCapacity) {
  uint32_t const numThreadsHist =
      std::min(1024u, static_cast<uint32_t>(custom::getMaxNumExperts(data.mNumExperts)));
  gLaunches = 0;
  bool const covered = custom::launchDynBlockKernel(data, numThreadsHist, stream);
  cudaError_t const err = cudaGetLastError();
  if (err != cudaSuccess) return cudaStatus(err, "launching the kernel", message, messageCapacity);
  if (!covered || gLaunches != 1) {
    writeMessage(message, messageCapacity,
                 "launchDynBlockKernel launched nothing: FlashInfer's dispatch does not select the "
                 "one instance compiled into this library for this configuration");
    return kNotLaunched;
  }
  return kOk;
}

bool shapeOk(int32_t numTokens, int32_t numExperts, int32_t topK, int32_t tileN) {
  return numTokens >= 1 && numTokens <= custom::DynBlockKernelMaxNumTokens && topK >= 1 &&
         numExperts >= topK && tileN >= 1;
}

}  // namespace fi_oracle

// Runs FlashInfer's dyn-block routing kernel on ids [numTokens, topK] (host, int32) for the local experts
// [localExpertOffset, localExpertOffset + numLocalExperts) and tile tileN. Every output buffer is first
// filled with `poison` on the device and copied back whole. scalars receives [permuted_idx_size,
// num_non_exiting_ctas]. Returns 0 on success, else a nonzero status with a message.
extern "C" int fi_dyn_block_metadata(int32_t const* ids, int32_t numTokens, int32_t numExperts,
                                     int32_t topK, int32_t localExpertOffset,
                                     int32_t numLocalExperts, int32_t tileN, int32_t poison,
                                     int32_t* expandedToPermuted, int32_t expandedCount,
                                     int32_t* ctaBatch, int32_t* ctaLimit, int32_t ctaCount,
                                     int32_t* permutedToToken, int32_t permutedCount,
                                     int32_t* scalars, char* message, int32_t messageCapacity) {
  using namespace fi_oracle;
  int32_t const routes = numTokens * topK;
  if (!shapeOk(numTokens, numExperts, topK, tileN) || expandedCount < routes || ctaCount < routes ||
      permutedCount / tileN < routes) {
    writeMessage(message, messageCapacity,
                 "bad shape: need 1 <= numTokens <= DynBlockKernelMaxNumTokens, topK <= numExperts, "
                 "and buffers of at least numTokens*topK entries (CTA rows: times tileN)");
    return kBadArgument;
  }
  try {
    Buffer outputs[] = {{expandedToPermuted, expandedCount}, {ctaBatch, ctaCount},
                        {ctaLimit, ctaCount},                {permutedToToken, permutedCount},
                        {scalars, 1},                        {scalars + 1, 1}};
    int32_t const outputsStart = partElements(routes);
    int32_t end = outputsStart;
    for (Buffer const& out : outputs) end += partElements(out.count);
    std::lock_guard<std::mutex> const lock(gBlockMutex);
    int32_t* block = nullptr;
    cudaError_t err = deviceBlock(end, &block);
    if (err != cudaSuccess) return cudaStatus(err, "cudaMalloc", message, messageCapacity);
    int32_t* const deviceIds = block;
    int32_t* next = block + outputsStart;
    for (Buffer& out : outputs) {
      out.device = next;
      next += partElements(out.count);
    }
    err = cudaMemcpy(deviceIds, ids, sizeof(int32_t) * routes, cudaMemcpyHostToDevice);
    if (err != cudaSuccess) return cudaStatus(err, "copying ids", message, messageCapacity);
    fillKernel<<<(end - outputsStart + 255) / 256, 256>>>(block + outputsStart, end - outputsStart, poison);
    err = cudaGetLastError();
    if (err != cudaSuccess) return cudaStatus(err, "poisoning outputs", message, messageCapacity);

    Outputs const devices{outputs[0].device, outputs[1].device, outputs[2].device,
                          outputs[3].device, outputs[4].device, outputs[5].device};
    custom::Data const data =
        precomputedIdsData(deviceIds, numTokens, numExperts, topK, localExpertOffset,
                           numLocalExperts, tileN, devices, /*usePdl=*/false);
    int const status = launchDynBlock(data, /*stream=*/nullptr, message, messageCapacity);
    if (status != kOk) return status;
    err = cudaDeviceSynchronize();
    if (err != cudaSuccess) return cudaStatus(err, "running the kernel", message, messageCapacity);
    std::vector<int32_t> host(end - outputsStart);
    err = cudaMemcpy(host.data(), block + outputsStart, sizeof(int32_t) * host.size(),
                     cudaMemcpyDeviceToHost);
    if (err != cudaSuccess) return cudaStatus(err, "copying outputs", message, messageCapacity);
    for (Buffer const& out : outputs) {
      std::copy_n(host.data() + (out.device - block - outputsStart), out.count, out.host);
    }
    return kOk;
  } catch (std::exception const& e) {
    writeMessage(message, messageCapacity, e.what());
    return kException;
  }
}

// Enqueues FlashInfer's dyn-block routing kernel on `stream` (a cudaStream_t of the current device) for
// device ids [numTokens, topK] and device output buffers sized as for fi_dyn_block_metadata (scalars: 2
// elements); with usePdl nonzero the launch allows programmatic dependent launch, as FlashInfer's own
// routing does when its caller enables PDL. Returns without waiting: 0 once exactly one kernel was
// launched without error, else a nonzero status with a message. Writes nothing on the host.
extern "C" int fi_dyn_block_enqueue(int32_t* deviceIds, int32_t numTokens, int32_t numExperts,
                                    int32_t topK, int32_t localExpertOffset,
                                    int32_t numLocalExperts, int32_t tileN,
                                    int32_t* expandedToPermuted, int32_t* ctaBatch,
                                    int32_t* ctaLimit, int32_t* permutedToToken, int32_t* scalars,
                                    void* stream, int32_t usePdl, char* message,
                                    int32_t messageCapacity) {
  using namespace fi_oracle;
  if (!shapeOk(numTokens, numExperts, topK, tileN) || deviceIds == nullptr ||
      expandedToPermuted == nullptr || ctaBatch == nullptr || ctaLimit == nullptr ||
      permutedToToken == nullptr || scalars == nullptr) {
    writeMessage(message, messageCapacity,
                 "bad arguments: need 1 <= numTokens <= DynBlockKernelMaxNumTokens, topK <= "
                 "numExperts, tileN >= 1 and non-null device buffers");
    return kBadArgument;
  }
  try {
    Outputs const devices{expandedToPermuted, ctaBatch, ctaLimit, permutedToToken, scalars,
                          scalars + 1};
    custom::Data const data =
        precomputedIdsData(deviceIds, numTokens, numExperts, topK, localExpertOffset,
                           numLocalExperts, tileN, devices, usePdl != 0);
    return launchDynBlock(data, static_cast<cudaStream_t>(stream), message, messageCapacity);
  } catch (std::exception const& e) {
    writeMessage(message, messageCapacity, e.what());
    return kException;
  }
}
