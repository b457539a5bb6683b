// CudaSelector and CudaGraphRunner: host side of the CUDA backend.
#include "topk/cuda_selector.h"

#include <cuda_runtime.h>

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernel_args.h"
#include "plan_workspace.h"
#include "routes.h"
#include "topk/cuda/resources.h"
#include "topk/cuda/route_stats.h"
#include "topk/cuda/status.h"

namespace topk {
namespace {

bool IsCudaRoute(Route r) {
  return r == Route::kPersistentSampled || r == Route::kRowLocalExact ||
         r == Route::kGeneralExact || r == Route::kKvSplitSampled || r == Route::kShortRowExact ||
         r == Route::kClusterSampled || r == Route::kResidentDecode;
}

cuda::KernelParams MakeParams(const Plan& plan, const CudaSelectorConfig& config, void* workspace) {
  auto* base = static_cast<uint8_t*>(workspace);
  cuda::KernelParams p;
  p.k = plan.shape.k;
  p.sample_stride = plan.sample_stride;
  p.sample_run = config.sample_run;
  p.sorted = plan.options.sorted ? 1 : 0;
  p.deterministic = plan.options.deterministic ? 1 : 0;
  p.dtype = static_cast<int32_t>(plan.shape.dtype);
  p.prefetch = config.l2_prefetch ? 1 : 0;
  p.admit_ring = CudaUseAdmitRing(plan.shape, plan.block, config) ? 1 : 0;
  p.short_row_variant = config.short_row_variant;
  p.row_trace = config.row_trace;
  if (plan.route == Route::kShortRowExact && (config.short_row_variant & kShortRowSharedRow)) {
    // Every row's 16-byte body, widened to FP32, takes at most 4 bytes a value.
    const int64_t bytes = (plan.shape.max_width * 4 + 15) / 16 * 16;
    p.short_row_buffer_bytes =
        bytes <= kShortRowMaxSharedRowBytes ? static_cast<int32_t>(bytes) : 0;
  }
  // The planner picked the variant (threads per CTA); the KV-split kernel
  // always runs the 512-thread one.
  p.block = plan.block == cuda::kSmallThreads ? cuda::kSmallThreads : cuda::kThreads;
  p.min_sampled_length =
      config.min_sampled_length > 0 ? config.min_sampled_length : planner::kMinSampledLength;
  // The workspace as the planner sized it (workspace_layout.h): the slices
  // for min(K, N_cap), the KV-split row state after the grid's slices.
  const cuda::WorkspaceLayout w = CudaLayoutWorkspace(plan, config);
  p.staged_k = w.staged_k;
  p.slice_entries = w.slice_entries;
  p.counters = reinterpret_cast<uint32_t*>(base + cuda::kCountersOffset);
  p.stats = reinterpret_cast<unsigned long long*>(base + cuda::kStatsOffset);
  p.cta_slices = base + w.slices_offset;
  p.cta_slice_bytes = w.slice_bytes;
  if (plan.route == Route::kKvSplitSampled) {
    p.split = plan.split;
    p.max_rows = plan.shape.max_rows;
    p.row_entries = w.row_entries;
    p.row_state = base + w.row_state_offset;
    p.kv_band = config.kv_split_band ? 1 : 0;
  }
  if (plan.route == Route::kClusterSampled) {
    p.split = plan.split;  // CTAs per cluster
    p.cluster_ctas_per_sm = plan.ctas_per_sm;
  }
  if (plan.route == Route::kResidentDecode) {
    p.split = plan.split;  // CTAs per cluster
    p.block = plan.block;  // 512 or 1024 threads
    p.resident_slice_keys =
        static_cast<int32_t>(CudaResidentSliceKeys(plan.shape.max_width, plan.split));
  }
  return p;
}

cudaError_t LaunchPlan(const Plan& plan, const cuda::DeviceArgs& args,
                       const cuda::DeviceArgs* dev_args, const cuda::KernelParams& params,
                       cudaStream_t stream) {
  if (plan.route == Route::kKvSplitSampled) {
    return cuda::LaunchKvSplit(args, dev_args, params, plan.grid, stream);
  }
  if (plan.route == Route::kShortRowExact) {
    return cuda::LaunchShortRow(args, dev_args, params, plan.grid, stream);
  }
  if (plan.route == Route::kClusterSampled) {
    return cuda::LaunchCluster(args, dev_args, params, plan.grid, stream);
  }
  if (plan.route == Route::kResidentDecode) {
    return cuda::LaunchResident(args, dev_args, params, plan.grid, stream);
  }
  return cuda::LaunchPersistent(args, dev_args, params, plan.grid, stream);
}

absl::Status CheckRun(const Plan& plan, const RowBatch& batch, const OutputView& out,
                      const RunContext& context) {
  if (!IsCudaRoute(plan.route)) {
    return absl::InvalidArgumentError("plan: not a CUDA plan (make it with CudaSelector)");
  }
  if (absl::Status s = CheckCudaScoreType(batch.dtype); !s.ok()) return s;
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
  const bool wide = batch.dtype == ScoreType::kFloat32;
  const void* scores = wide ? static_cast<const void*>(batch.scores) : batch.scores16;
  const char* field = wide ? "scores" : "scores16";
  if (scores == nullptr)
    return absl::InvalidArgumentError(absl::StrFormat("%s: null pointer", field));
  if ((wide ? batch.scores16 != nullptr : batch.scores != nullptr)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: set for a %s batch (use %s)",
                                                      wide ? "scores16" : "scores",
                                                      ScoreTypeName(batch.dtype), field));
  }
  if (batch.layout == Layout::kPitched && batch.pitch < batch.width) {
    return absl::InvalidArgumentError(
        absl::StrFormat("pitch = %d: must be >= width = %d", batch.pitch, batch.width));
  }
  if (batch.layout == Layout::kPacked && batch.row_offsets == nullptr) {
    return absl::InvalidArgumentError("row_offsets: null pointer for a packed layout");
  }
  // Rows start anywhere on the element grid (pitch and offsets count
  // elements), so the base alignment is every row's.
  const uintptr_t element_bytes = static_cast<uintptr_t>(ScoreTypeBytes(batch.dtype));
  if ((reinterpret_cast<uintptr_t>(scores) & (element_bytes - 1u)) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: not %d-byte aligned (%s elements)", field, element_bytes, ScoreTypeName(batch.dtype)));
  }
  return absl::OkStatus();
}

cuda::DeviceArgs MakeArgs(const RowBatch& batch, const OutputView& out) {
  cuda::DeviceArgs a;
  a.scores = batch.dtype == ScoreType::kFloat32 ? static_cast<const void*>(batch.scores)
                                                : static_cast<const void*>(batch.scores16);
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
  TOPK_CUDA_RETURN_IF_ERROR(cuda::ConfigurePersistentRoute());
  TOPK_CUDA_RETURN_IF_ERROR(cuda::ConfigureKvSplitRoute());
  TOPK_CUDA_RETURN_IF_ERROR(cuda::ConfigureShortRowRoute());
  TOPK_CUDA_RETURN_IF_ERROR(cuda::ConfigureClusterRoute());
  TOPK_CUDA_RETURN_IF_ERROR(cuda::ConfigureResidentRoute());
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
  if (prop.major >= 9) {
    TOPK_CUDA_RETURN_IF_ERROR(cuda::ClusterOccupancy(8, 1, &info.clusters_of_8));
    TOPK_CUDA_RETURN_IF_ERROR(cuda::ClusterOccupancy(16, 1, &info.clusters_of_16));
    TOPK_CUDA_RETURN_IF_ERROR(cuda::ClusterOccupancy(8, 2, &info.dense_clusters_of_8));
    TOPK_CUDA_RETURN_IF_ERROR(cuda::ClusterOccupancy(16, 2, &info.dense_clusters_of_16));
    for (int i = 0; i < 5; ++i) {
      TOPK_CUDA_RETURN_IF_ERROR(cuda::ResidentOccupancy(1 << i, &info.resident_clusters[i]));
    }
  }
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
#define TOPK_CUDA_READ_STAT(field, enumerator) \
  s.field = static_cast<int64_t>(v[static_cast<int>(cuda::Stat::enumerator)]);
  TOPK_CUDA_ROUTE_STATS(TOPK_CUDA_READ_STAT)
#undef TOPK_CUDA_READ_STAT
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

// Members are destroyed in reverse order: the executable graph and the graph
// go before the stream the runner created.
struct CudaGraphRunner::Impl {
  Plan plan;
  int device = 0;
  cuda::Stream owned_stream;      // set when the context gave no stream
  cudaStream_t stream = nullptr;  // owned_stream or the context's stream
  cuda::KernelParams params;      // the captured kernel's per-plan arguments
  uint32_t* counters = nullptr;   // the workspace's row-claim counters
  cuda::Graph graph;
  cuda::GraphExec exec;
  cudaGraphNode_t kernel = nullptr;  // the route's kernel node in graph
  cudaKernelNodeParams node{};       // its launch configuration as captured
  bool reinit = false;               // a launch failed: zero the counters first

  // Replays may still run the graph on the workspace: the runner's stream
  // finishes before the owners release the graph.
  ~Impl() {
    if (stream != nullptr) cudaStreamSynchronize(stream);
  }
};

namespace {

// The one kernel node of a captured route graph (every route is one kernel,
// KV-split with a memset in front of it).
cudaError_t FindKernelNode(cudaGraph_t graph, cudaGraphNode_t* kernel) {
  size_t n = 0;
  cudaError_t e = cudaGraphGetNodes(graph, nullptr, &n);
  if (e != cudaSuccess) return e;
  std::vector<cudaGraphNode_t> nodes(n);
  e = cudaGraphGetNodes(graph, nodes.data(), &n);
  if (e != cudaSuccess) return e;
  *kernel = nullptr;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    e = cudaGraphNodeGetType(node, &type);
    if (e != cudaSuccess) return e;
    if (type != cudaGraphNodeTypeKernel) continue;
    if (*kernel != nullptr) return cudaErrorInvalidValue;  // more than one kernel
    *kernel = node;
  }
  return *kernel != nullptr ? cudaSuccess : cudaErrorInvalidValue;
}

}  // namespace

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
  impl->stream = static_cast<cudaStream_t>(context.stream);
  if (impl->stream == nullptr) {
    auto owned_stream = cuda::CreateStream();
    if (!owned_stream.ok()) return owned_stream.status();
    impl->owned_stream = *std::move(owned_stream);
    impl->stream = impl->owned_stream.get();
  }
  impl->params = MakeParams(plan, selector.config(), context.workspace);
  // The kernels leave the counters zero after every launch; a garbage
  // workspace gets them zeroed once, here, before any replay (on any
  // stream), so the graph has no memset node for them.
  impl->params.zero_counters = 0;
  impl->counters = impl->params.counters;
  TOPK_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(impl->counters, 0, 2 * sizeof(uint32_t), impl->stream));
  TOPK_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl->stream));
  TOPK_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(impl->stream, cudaStreamCaptureModeThreadLocal));
  const cudaError_t e = LaunchPlan(plan, cuda::DeviceArgs{}, nullptr, impl->params, impl->stream);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(impl->stream, &graph);
  impl->graph = cuda::Graph(graph);
  TOPK_CUDA_RETURN_IF_ERROR(e);
  TOPK_CUDA_RETURN_IF_ERROR(end);
  if (const cudaError_t f = FindKernelNode(impl->graph.get(), &impl->kernel); f != cudaSuccess) {
    return absl::InternalError("graph: the captured route is not one kernel node");
  }
  TOPK_CUDA_RETURN_IF_ERROR(cudaGraphKernelNodeGetParams(impl->kernel, &impl->node));
  {
    auto exec = cuda::Instantiate(impl->graph.get());
    if (!exec.ok()) return exec.status();
    impl->exec = *std::move(exec);
  }
  return std::unique_ptr<CudaGraphRunner>(new CudaGraphRunner(std::move(impl)));
}

absl::Status CudaGraphRunner::Replay(const RowBatch& batch, const OutputView& out, void* stream) {
  Impl& m = *impl_;
  RunContext fake{reinterpret_cast<void*>(1), m.plan.workspace_bytes, nullptr};
  if (absl::Status s = CheckRun(m.plan, batch, out, fake); !s.ok()) return s;
  cudaStream_t s = stream != nullptr ? static_cast<cudaStream_t>(stream) : m.stream;
  // Every route kernel takes (DeviceArgs, const DeviceArgs*, KernelParams):
  // the batch by value, no device block, the plan's constants. The node
  // copies them, so nothing here outlives the call.
  cuda::DeviceArgs args = MakeArgs(batch, out);
  const cuda::DeviceArgs* no_block = nullptr;
  cuda::KernelParams params = m.params;
  void* values[] = {&args, &no_block, &params};
  cudaKernelNodeParams node = m.node;
  node.kernelParams = values;
  node.extra = nullptr;
  TOPK_CUDA_RETURN_IF_ERROR(cudaGraphExecKernelNodeSetParams(m.exec.get(), m.kernel, &node));
  if (m.reinit) {
    TOPK_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(m.counters, 0, 2 * sizeof(uint32_t), s));
    m.reinit = false;
  }
  if (const cudaError_t e = cudaGraphLaunch(m.exec.get(), s); e != cudaSuccess) {
    // The kernels did not run to their counter reset.
    m.reinit = true;
    TOPK_CUDA_RETURN_IF_ERROR(e);
  }
  return absl::OkStatus();
}

}  // namespace topk
