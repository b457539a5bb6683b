// CudaSelector and CudaGraphRunner: host side of the CUDA backend.
#include "topk/cuda_selector.h"

#include <cuda_runtime.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "cuda_check.h"
#include "kernel_args.h"
#include "persistent_kernel.cuh"

namespace topk {
namespace {

bool IsCudaRoute(Route r) {
  return r == Route::kPersistentSampled || r == Route::kRowLocalExact ||
         r == Route::kGeneralExact || r == Route::kKvSplitSampled || r == Route::kRegisterExact;
}

cuda::KernelParams MakeParams(const Plan& plan, const CudaSelectorConfig& config, void* workspace) {
  auto* base = static_cast<uint8_t*>(workspace);
  cuda::KernelParams p;
  p.k = plan.shape.k;
  p.sample_stride = plan.sample_stride;
  p.sample_run = config.sample_run;
  p.sorted = plan.options.sorted ? 1 : 0;
  p.deterministic = plan.options.deterministic ? 1 : 0;
  p.prefetch = config.l2_prefetch ? 1 : 0;
  // The planner picked the variant (threads per CTA); the KV-split kernel
  // always runs the 512-thread one.
  p.block = plan.block == cuda::kSmallThreads ? cuda::kSmallThreads : cuda::kThreads;
  p.min_sampled_length =
      config.min_sampled_length > 0 ? config.min_sampled_length : kCudaMinSampledLength;
  p.slice_entries = CudaSliceEntries(plan.shape.k);
  p.counters = reinterpret_cast<uint32_t*>(base + cuda::kCountersOffset);
  p.stats = reinterpret_cast<unsigned long long*>(base + cuda::kStatsOffset);
  p.cta_slices = base + cuda::kHeaderBytes;
  p.cta_slice_bytes = cuda::CtaSliceBytes(plan.shape.k, p.slice_entries);
  if (plan.route == Route::kKvSplitSampled) {
    p.split = plan.split;
    p.max_rows = plan.shape.max_rows;
    p.row_entries = CudaKvRowEntries(plan.shape.k);
    p.row_state = p.cta_slices + int64_t{plan.grid} * p.cta_slice_bytes;
  }
  return p;
}

cudaError_t LaunchPlan(const Plan& plan, const cuda::DeviceArgs& args,
                       const cuda::DeviceArgs* dev_args, const cuda::KernelParams& params,
                       cudaStream_t stream) {
  if (plan.route == Route::kKvSplitSampled) {
    return cuda::LaunchKvSplit(args, dev_args, params, plan.grid, stream);
  }
  if (plan.route == Route::kRegisterExact) {
    return cuda::LaunchRegisterExact(args, dev_args, params, plan.grid, stream);
  }
  return cuda::LaunchPersistent(args, dev_args, params, plan.grid, stream);
}

absl::Status CheckRun(const Plan& plan, const RowBatch& batch, const OutputView& out,
                      const RunContext& context) {
  if (!IsCudaRoute(plan.route)) {
    return absl::InvalidArgumentError("plan: not a CUDA plan (make it with CudaSelector)");
  }
  if (absl::Status s = CheckBatchFitsPlan(plan, batch); !s.ok()) return s;
  if (batch.num_rows < 0) return absl::InvalidArgumentError("num_rows: negative");
  if (context.workspace == nullptr || context.workspace_bytes < plan.workspace_bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("workspace: %d bytes given, the plan needs %d", context.workspace_bytes,
                        plan.workspace_bytes));
  }
  if (batch.num_rows == 0) return absl::OkStatus();
  if (out.indices == nullptr) return absl::InvalidArgumentError("indices: null pointer");
  if (batch.lengths == nullptr) return absl::InvalidArgumentError("lengths: null pointer");
  if (batch.scores == nullptr) return absl::InvalidArgumentError("scores: null pointer");
  if (batch.layout == Layout::kPitched && batch.pitch < batch.width) {
    return absl::InvalidArgumentError(
        absl::StrFormat("pitch = %d: must be >= width = %d", batch.pitch, batch.width));
  }
  if (batch.layout == Layout::kPacked && batch.row_offsets == nullptr) {
    return absl::InvalidArgumentError("row_offsets: null pointer for a packed layout");
  }
  if ((reinterpret_cast<uintptr_t>(batch.scores) & 3u) != 0) {
    return absl::InvalidArgumentError("scores: not 4-byte aligned");
  }
  return absl::OkStatus();
}

cuda::DeviceArgs MakeArgs(const RowBatch& batch, const OutputView& out) {
  cuda::DeviceArgs a;
  a.scores = batch.scores;
  a.pitch = batch.pitch;
  a.row_offsets = batch.row_offsets;
  a.lengths = batch.lengths;
  a.indices = out.indices;
  a.row_status = out.row_status;
  a.num_rows = batch.num_rows;
  a.width = batch.width;
  a.layout = static_cast<int32_t>(batch.layout);
  return a;
}

}  // namespace

CudaSelector::CudaSelector(CudaSelectorConfig config, CudaDeviceInfo info)
    : config_(config), info_(info) {}
CudaSelector::~CudaSelector() = default;

absl::StatusOr<std::unique_ptr<CudaSelector>> CudaSelector::Create(CudaSelectorConfig config) {
  int count = 0;
  TOPK_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (count == 0) return absl::FailedPreconditionError("no CUDA device");
  if (config.device < 0 || config.device >= count) {
    return absl::InvalidArgumentError(
        absl::StrFormat("device = %d: %d CUDA devices present", config.device, count));
  }
  TOPK_CUDA_RETURN_IF_ERROR(cudaSetDevice(config.device));
  cudaDeviceProp prop;
  TOPK_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, config.device));
  if (prop.major < 8) {
    return absl::FailedPreconditionError(
        absl::StrFormat("device %d is sm_%d%d: the CUDA backend needs sm_80 or newer",
                        config.device, prop.major, prop.minor));
  }
  TOPK_CUDA_RETURN_IF_ERROR(cuda::ConfigurePersistentKernel());
  CudaDeviceInfo info;
  info.sm_count = prop.multiProcessorCount;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  info.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  info.global_mem_bytes = prop.totalGlobalMem;
  TOPK_CUDA_RETURN_IF_ERROR(
      cuda::PersistentOccupancy(cuda::kThreads, &info.persistent_ctas_per_sm));
  if (info.persistent_ctas_per_sm < 1) {
    return absl::FailedPreconditionError("the persistent kernel does not fit on an SM");
  }
  TOPK_CUDA_RETURN_IF_ERROR(
      cuda::PersistentOccupancy(cuda::kSmallThreads, &info.small_block_ctas_per_sm));
  TOPK_CUDA_RETURN_IF_ERROR(cuda::RegisterExactOccupancy(&info.register_exact_ctas_per_sm));
  if (absl::Status s =
          PlanCudaSelection(ProblemShape{1, 1, 1, Layout::kPitched}, {}, info, config).status();
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<CudaSelector>(new CudaSelector(config, info));
}

absl::StatusOr<Plan> CudaSelector::MakePlan(const ProblemShape& shape,
                                            const SelectOptions& options) const {
  return PlanCudaSelection(shape, options, info_, config_);
}

absl::Status CudaSelector::Run(const Plan& plan, const RowBatch& batch, const OutputView& out,
                               const RunContext& context) {
  if (absl::Status s = CheckRun(plan, batch, out, context); !s.ok()) return s;
  if (batch.num_rows == 0) return absl::OkStatus();
  TOPK_CUDA_RETURN_IF_ERROR(cudaSetDevice(config_.device));
  const cuda::KernelParams params = MakeParams(plan, config_, context.workspace);
  TOPK_CUDA_RETURN_IF_ERROR(LaunchPlan(plan, MakeArgs(batch, out), nullptr, params,
                                       static_cast<cudaStream_t>(context.stream)));
  return absl::OkStatus();
}

absl::StatusOr<CudaRouteStats> CudaSelector::ReadStats(const RunContext& context) const {
  if (context.workspace == nullptr) return absl::InvalidArgumentError("workspace: null");
  unsigned long long v[cuda::kNumStats];
  auto stream = static_cast<cudaStream_t>(context.stream);
  TOPK_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(v, static_cast<uint8_t*>(context.workspace) + cuda::kStatsOffset, sizeof(v),
                      cudaMemcpyDeviceToHost, stream));
  TOPK_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  CudaRouteStats s;
  s.rows = static_cast<int64_t>(v[0]);
  s.sampled = static_cast<int64_t>(v[1]);
  s.certified = static_cast<int64_t>(v[2]);
  s.band_rescued = static_cast<int64_t>(v[3]);
  s.exact_recovery = static_cast<int64_t>(v[4]);
  s.exact_rows = static_cast<int64_t>(v[5]);
  s.candidates = static_cast<int64_t>(v[6]);
  s.rescans = static_cast<int64_t>(v[7]);
  s.cycles_proposal = static_cast<int64_t>(v[8]);
  s.cycles_admit = static_cast<int64_t>(v[9]);
  s.cycles_refine = static_cast<int64_t>(v[10]);
  s.cycles_finalize = static_cast<int64_t>(v[11]);
  return s;
}

absl::Status CudaSelector::ResetStats(const RunContext& context) const {
  if (context.workspace == nullptr) return absl::InvalidArgumentError("workspace: null");
  auto stream = static_cast<cudaStream_t>(context.stream);
  TOPK_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(static_cast<uint8_t*>(context.workspace) + cuda::kStatsOffset, 0,
                      cuda::kNumStats * sizeof(unsigned long long), stream));
  TOPK_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

absl::StatusOr<std::pair<uint32_t, uint32_t>> CudaSelector::ReadCounters(
    const RunContext& context) const {
  if (context.workspace == nullptr) return absl::InvalidArgumentError("workspace: null");
  uint32_t v[2];
  auto stream = static_cast<cudaStream_t>(context.stream);
  TOPK_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(v, static_cast<uint8_t*>(context.workspace) + cuda::kCountersOffset,
                      sizeof(v), cudaMemcpyDeviceToHost, stream));
  TOPK_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return std::make_pair(v[0], v[1]);
}

// --- CudaGraphRunner ---------------------------------------------------------

struct CudaGraphRunner::Impl {
  Plan plan;
  int device = 0;
  cuda::DeviceArgs* pinned = nullptr;  // host, page-locked
  cudaStream_t stream = nullptr;
  bool own_stream = false;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t copied = nullptr;  // recorded inside the graph after the argument copy
  bool launched = false;

  ~Impl() {
    if (launched && copied != nullptr) cudaEventSynchronize(copied);
    if (stream != nullptr) cudaStreamSynchronize(stream);
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (copied != nullptr) cudaEventDestroy(copied);
    if (pinned != nullptr) cudaFreeHost(pinned);
    if (own_stream && stream != nullptr) cudaStreamDestroy(stream);
  }
};

CudaGraphRunner::CudaGraphRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaGraphRunner::~CudaGraphRunner() = default;

absl::StatusOr<std::unique_ptr<CudaGraphRunner>> CudaGraphRunner::Create(
    const CudaSelector& selector, const Plan& plan, const RunContext& context) {
  if (!IsCudaRoute(plan.route)) return absl::InvalidArgumentError("plan: not a CUDA plan");
  if (context.workspace == nullptr || context.workspace_bytes < plan.workspace_bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("workspace: %d bytes given, the plan needs %d", context.workspace_bytes,
                        plan.workspace_bytes));
  }
  auto impl = std::make_unique<Impl>();
  impl->plan = plan;
  impl->device = selector.config().device;
  TOPK_CUDA_RETURN_IF_ERROR(cudaSetDevice(impl->device));
  TOPK_CUDA_RETURN_IF_ERROR(cudaHostAlloc(reinterpret_cast<void**>(&impl->pinned),
                                          sizeof(cuda::DeviceArgs), cudaHostAllocDefault));
  *impl->pinned = cuda::DeviceArgs{};
  impl->stream = static_cast<cudaStream_t>(context.stream);
  if (impl->stream == nullptr) {
    TOPK_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking));
    impl->own_stream = true;
  }
  TOPK_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&impl->copied, cudaEventDisableTiming));
  auto* dev_args = reinterpret_cast<cuda::DeviceArgs*>(static_cast<uint8_t*>(context.workspace) +
                                                       cuda::kArgsOffset);
  const cuda::KernelParams params = MakeParams(plan, selector.config(), context.workspace);
  TOPK_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(impl->stream, cudaStreamCaptureModeThreadLocal));
  cudaError_t e = cudaMemcpyAsync(dev_args, impl->pinned, sizeof(cuda::DeviceArgs),
                                  cudaMemcpyHostToDevice, impl->stream);
  // External: a real event-record node the host can wait on after replays.
  if (e == cudaSuccess) {
    e = cudaEventRecordWithFlags(impl->copied, impl->stream, cudaEventRecordExternal);
  }
  if (e == cudaSuccess) {
    e = LaunchPlan(plan, cuda::DeviceArgs{}, dev_args, params, impl->stream);
  }
  const cudaError_t end = cudaStreamEndCapture(impl->stream, &impl->graph);
  TOPK_CUDA_RETURN_IF_ERROR(e);
  TOPK_CUDA_RETURN_IF_ERROR(end);
  TOPK_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&impl->exec, impl->graph, 0));
  return std::unique_ptr<CudaGraphRunner>(new CudaGraphRunner(std::move(impl)));
}

absl::Status CudaGraphRunner::Replay(const RowBatch& batch, const OutputView& out, void* stream) {
  Impl& m = *impl_;
  RunContext fake{reinterpret_cast<void*>(1), m.plan.workspace_bytes, nullptr};
  if (absl::Status s = CheckRun(m.plan, batch, out, fake); !s.ok()) return s;
  // The previous replay's copy must have read the pinned block before it is
  // rewritten (the kernel reads the device copy, not this one).
  if (m.launched) TOPK_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(m.copied));
  *m.pinned = MakeArgs(batch, out);
  cudaStream_t s = stream != nullptr ? static_cast<cudaStream_t>(stream) : m.stream;
  TOPK_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(m.exec, s));
  m.launched = true;
  return absl::OkStatus();
}

}  // namespace topk
