#include "server/engine/cuda_backend.h"

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

#if TOPK_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "server/engine/plan_cache.h"
#include "topk/cuda_selector.h"
#endif

namespace topk::server {

#if !TOPK_HAVE_CUDA

absl::StatusOr<std::vector<int>> UsableCudaDevices() {
  return absl::UnimplementedError("the server was built without CUDA");
}

absl::StatusOr<std::unique_ptr<Device>> MakeCudaDevice(int ordinal, bool /*use_graphs*/) {
  return absl::UnimplementedError(
      absl::StrCat("CUDA device ", ordinal, ": the server was built without CUDA"));
}

#else  // TOPK_HAVE_CUDA

namespace {

absl::Status CudaError(cudaError_t error, absl::string_view what) {
  // Every CUDA failure is treated as sticky (UNAVAILABLE): after an error the
  // context may be unusable, and a wrong answer is worse than no answer.
  return absl::UnavailableError(
      absl::StrCat(what, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")"));
}

#define TOPK_CUDA_RETURN_IF_ERROR(expr, what)         \
  do {                                                \
    if (cudaError_t e_ = (expr); e_ != cudaSuccess) { \
      return CudaError(e_, what);                     \
    }                                                 \
  } while (0)

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct HostFree {
  void operator()(void* p) const { cudaFreeHost(p); }
};
struct StreamDestroy {
  void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
};
using DeviceBuffer = std::unique_ptr<void, DeviceFree>;
using PinnedBuffer = std::unique_ptr<void, HostFree>;
using Stream = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDestroy>;

absl::StatusOr<DeviceBuffer> AllocDevice(size_t bytes, absl::string_view what) {
  void* p = nullptr;
  TOPK_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes == 0 ? 1 : bytes), what);
  return DeviceBuffer(p);
}

absl::StatusOr<PinnedBuffer> AllocPinned(size_t bytes, absl::string_view what) {
  void* p = nullptr;
  TOPK_CUDA_RETURN_IF_ERROR(cudaMallocHost(&p, bytes == 0 ? 1 : bytes), what);
  return PinnedBuffer(p);
}

class CudaWorker final : public WorkerBackend {
 public:
  absl::StatusOr<Plan> MakePlan(const ProblemShape& shape,
                                const SelectOptions& options) const override {
    return selector_->MakePlan(shape, options);
  }

  static absl::StatusOr<std::unique_ptr<CudaWorker>> Create(int ordinal, bool use_graphs,
                                                            const EngineLimits& limits) {
    TOPK_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal), "cudaSetDevice");
    auto worker = absl::WrapUnique(new CudaWorker(ordinal, use_graphs, limits));
    absl::StatusOr<std::unique_ptr<CudaSelector>> selector =
        CudaSelector::Create(CudaSelectorConfig{.device = ordinal});
    if (!selector.ok()) return selector.status();
    worker->selector_ = *std::move(selector);
    absl::StatusOr<size_t> workspace = MaxWorkspaceBytes(*worker->selector_, limits);
    if (!workspace.ok()) return workspace.status();
    worker->workspace_bytes_ = *workspace;
    cudaStream_t stream = nullptr;
    TOPK_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                              "cudaStreamCreate");
    worker->stream_.reset(stream);
    const size_t rows = limits.max_rows;
    const size_t outputs = rows * limits.max_k;
    struct Want {
      DeviceBuffer* device;
      PinnedBuffer* pinned;
      size_t bytes;
    };
    const Want wants[] = {
        {&worker->d_scores_, &worker->h_scores_, static_cast<size_t>(limits.max_batch_bytes)},
        {&worker->d_offsets_, &worker->h_offsets_, rows * sizeof(int64_t)},
        {&worker->d_lengths_, &worker->h_lengths_, rows * sizeof(int32_t)},
        {&worker->d_indices_, &worker->h_indices_, outputs * sizeof(int32_t)},
        {&worker->d_status_, &worker->h_status_, rows * sizeof(RowStatus)},
    };
    for (const Want& want : wants) {
      absl::StatusOr<DeviceBuffer> d = AllocDevice(want.bytes, "cudaMalloc (worker buffers)");
      if (!d.ok()) return d.status();
      *want.device = *std::move(d);
      absl::StatusOr<PinnedBuffer> h = AllocPinned(want.bytes, "cudaMallocHost (staging)");
      if (!h.ok()) return h.status();
      *want.pinned = *std::move(h);
    }
    absl::StatusOr<DeviceBuffer> ws =
        AllocDevice(worker->workspace_bytes_, "cudaMalloc (workspace)");
    if (!ws.ok()) return ws.status();
    worker->d_workspace_ = *std::move(ws);
    return worker;
  }

  bool stages_scores() const override { return true; }
  const float* staged_scores() const override { return static_cast<const float*>(h_scores_.get()); }

  absl::Status Select(const Plan& plan, const HostRows& rows, int32_t* indices,
                      RowStatus* row_status) override {
    if (plan.workspace_bytes > workspace_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "plan needs ", plan.workspace_bytes, " workspace bytes, worker has ", workspace_bytes_));
    }
    TOPK_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal_), "cudaSetDevice");
    cudaStream_t stream = stream_.get();
    const size_t score_bytes = rows.total_elements * sizeof(float);
    const size_t m = rows.num_rows;
    const size_t out_count = m * plan.shape.k;
    // Pinned staging makes the uploads true async DMA on the worker's stream.
    if (rows.source != nullptr) {
      rows.source->CopyTo(static_cast<char*>(h_scores_.get()));  // straight from gRPC's buffer
    } else {
      std::memcpy(h_scores_.get(), rows.scores, score_bytes);
    }
    std::memcpy(h_offsets_.get(), rows.row_offsets, m * sizeof(int64_t));
    std::memcpy(h_lengths_.get(), rows.lengths, m * sizeof(int32_t));
    TOPK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_scores_.get(), h_scores_.get(), score_bytes,
                                              cudaMemcpyHostToDevice, stream),
                              "upload scores");
    TOPK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_offsets_.get(), h_offsets_.get(),
                                              m * sizeof(int64_t), cudaMemcpyHostToDevice, stream),
                              "upload offsets");
    TOPK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_lengths_.get(), h_lengths_.get(),
                                              m * sizeof(int32_t), cudaMemcpyHostToDevice, stream),
                              "upload lengths");
    const RowBatch batch{.scores = static_cast<const float*>(d_scores_.get()),
                         .layout = Layout::kPacked,
                         .row_offsets = static_cast<const int64_t*>(d_offsets_.get()),
                         .lengths = static_cast<const int32_t*>(d_lengths_.get()),
                         .num_rows = rows.num_rows,
                         .width = plan.shape.max_width};
    const OutputView out{.indices = static_cast<int32_t*>(d_indices_.get()),
                         .row_status = static_cast<RowStatus*>(d_status_.get())};
    const RunContext context{
        .workspace = d_workspace_.get(), .workspace_bytes = workspace_bytes_, .stream = stream};
    CudaGraphRunner* graph = GraphFor(plan, context);
    absl::Status s = graph != nullptr ? graph->Replay(batch, out, stream)
                                      : selector_->Run(plan, batch, out, context);
    if (!s.ok()) {
      // A launch failure leaves the stream in an unknown state: sticky.
      if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
        return CudaError(e, absl::StrCat("select: ", s.message()));
      }
      return s;
    }
    TOPK_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(h_indices_.get(), d_indices_.get(), out_count * sizeof(int32_t),
                        cudaMemcpyDeviceToHost, stream),
        "download indices");
    TOPK_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(h_status_.get(), d_status_.get(), m * sizeof(RowStatus),
                        cudaMemcpyDeviceToHost, stream),
        "download row status");
    TOPK_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "select");
    std::memcpy(indices, h_indices_.get(), out_count * sizeof(int32_t));
    std::memcpy(row_status, h_status_.get(), m * sizeof(RowStatus));
    return absl::OkStatus();
  }

 private:
  CudaWorker(int ordinal, bool use_graphs, const EngineLimits& limits)
      : ordinal_(ordinal), use_graphs_(use_graphs), limits_(limits) {}

  // The captured graph of the plan's bucket, captured on first use (the one
  // allocation a bucket costs; the engine's plan buckets bound how many).
  // nullptr: run the selector directly (graphs off, or capture failed).
  CudaGraphRunner* GraphFor(const Plan& plan, const RunContext& context) {
    if (!use_graphs_) return nullptr;
    const PlanKey key{.k = plan.shape.k,
                      .max_rows = plan.shape.max_rows,
                      .max_width = plan.shape.max_width,
                      .sorted = plan.options.sorted,
                      .deterministic = plan.options.deterministic};
    if (auto it = graphs_.find(key); it != graphs_.end()) return it->second.get();
    absl::StatusOr<std::unique_ptr<CudaGraphRunner>> graph =
        CudaGraphRunner::Create(*selector_, plan, context);
    if (!graph.ok()) {
      spdlog::warn("CUDA graph capture failed for k={} rows={} width={}: {}; running uncaptured",
                   key.k, key.max_rows, key.max_width, graph.status().ToString());
      graphs_.emplace(key, nullptr);
      return nullptr;
    }
    return graphs_.emplace(key, *std::move(graph)).first->second.get();
  }

  int ordinal_;
  bool use_graphs_;
  EngineLimits limits_;
  std::unique_ptr<CudaSelector> selector_;
  size_t workspace_bytes_ = 0;
  Stream stream_;
  DeviceBuffer d_scores_, d_offsets_, d_lengths_, d_indices_, d_status_, d_workspace_;
  PinnedBuffer h_scores_, h_offsets_, h_lengths_, h_indices_, h_status_;
  // Declared last so it is destroyed first: a graph runner synchronises the
  // worker's stream and refers to its buffers while it is torn down.
  absl::flat_hash_map<PlanKey, std::unique_ptr<CudaGraphRunner>> graphs_;
};

class CudaDevice final : public Device {
 public:
  CudaDevice(int ordinal, bool use_graphs, DeviceDescription description)
      : ordinal_(ordinal), use_graphs_(use_graphs), description_(std::move(description)) {}

  std::string backend_name() const override { return "cuda"; }
  DeviceDescription description() const override { return description_; }

  absl::StatusOr<std::unique_ptr<WorkerBackend>> CreateWorker(const EngineLimits& limits) override {
    absl::StatusOr<std::unique_ptr<CudaWorker>> worker =
        CudaWorker::Create(ordinal_, use_graphs_, limits);
    if (!worker.ok()) return worker.status();
    return std::unique_ptr<WorkerBackend>(*std::move(worker));
  }

 private:
  int ordinal_;
  bool use_graphs_;
  DeviceDescription description_;
};

std::string UuidString(const cudaUUID_t& uuid) {
  std::string out = "GPU-";
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    const auto byte = static_cast<unsigned char>(uuid.bytes[i]);
    out += kHex[byte >> 4];
    out += kHex[byte & 15];
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<int>> UsableCudaDevices() {
  int count = 0;
  TOPK_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  std::vector<int> usable;
  for (int d = 0; d < count; ++d) {
    // A device is usable when a context can be made on it.
    if (cudaSetDevice(d) == cudaSuccess && cudaFree(nullptr) == cudaSuccess) usable.push_back(d);
  }
  return usable;
}

absl::StatusOr<std::unique_ptr<Device>> MakeCudaDevice(int ordinal, bool use_graphs) {
  cudaDeviceProp prop{};
  TOPK_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties");
  DeviceDescription description{.ordinal = ordinal,
                                .name = prop.name,
                                .uuid = UuidString(prop.uuid),
                                .memory_bytes = static_cast<int64_t>(prop.totalGlobalMem)};
  return std::unique_ptr<Device>(
      std::make_unique<CudaDevice>(ordinal, use_graphs, std::move(description)));
}

#endif  // TOPK_HAVE_CUDA

}  // namespace topk::server
