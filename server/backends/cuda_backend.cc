// The CUDA backend's worker (cuda_worker.h): stages a batch's host rows, uploads
// offsets and lengths, replays one CUDA graph per plan bucket and places each
// part's answer. CUDA builds only; the devices are cuda_device.cc's.
#include "absl/strings/str_cat.h"
#include "server/backends/cuda_worker.h"

#if TOPK_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "server/backends/cuda_output.h"
#include "server/backends/plan_buckets.h"
#include "server/backends/staged_chunks.h"
#include "spdlog/spdlog.h"
#include "topk/cuda/resources.h"
#include "topk/cuda/status.h"
#include "topk/cuda_selector.h"
#endif

namespace topk::server {

#if TOPK_HAVE_CUDA

namespace {

// The staging copy's unit: big enough that a chunk's upload call (a few
// microseconds) and its DMA setup cost little beside its bytes, small
// enough that the first upload starts after ~0.1 ms of copying and a
// 32 MB request spreads over all of the shared copy threads.
constexpr size_t kStagingChunkBytes = size_t{512} << 10;

absl::Status UseDevice(int ordinal) {
  TOPK_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
  return absl::OkStatus();
}

class CudaWorker final : public WorkerBackend {
 public:
  static absl::StatusOr<std::unique_ptr<CudaWorker>> Create(int ordinal, bool use_graphs,
                                                            std::shared_ptr<CopyPool> copy_pool,
                                                            CopyStores staging_stores,
                                                            const RequestLimits& limits) {
    if (absl::Status s = DeviceLost(UseDevice(ordinal)); !s.ok()) return s;
    auto worker = std::unique_ptr<CudaWorker>(
        new CudaWorker(ordinal, use_graphs, std::move(copy_pool), staging_stores, limits));
    absl::StatusOr<std::unique_ptr<CudaSelector>> selector =
        CudaSelector::Create(CudaSelectorConfig{.device = ordinal});
    if (!selector.ok()) return selector.status();
    worker->selector_ = *std::move(selector);
    absl::StatusOr<size_t> workspace = MaxWorkspaceBytes(*worker->selector_, limits);
    if (!workspace.ok()) return workspace.status();
    if (absl::Status s = DeviceLost(worker->Allocate(limits, *workspace)); !s.ok()) return s;
    return worker;
  }

  absl::StatusOr<Plan> MakePlan(const ProblemShape& shape,
                                const SelectOptions& options) const override {
    return selector_->MakePlan(shape, options);
  }

  BackendCounters counters() const override {
    return {.graph_captures = captures_.load(std::memory_order_relaxed),
            .graph_capture_failures = capture_failures_.load(std::memory_order_relaxed),
            .graph_replays = replays_.load(std::memory_order_relaxed)};
  }

  // Rows on this GPU (a CUDA IPC region) are read where they are, and an
  // output target on it is written in place: then no score and no output
  // byte crosses the host; only the row offsets go up (M x 8 bytes, checked
  // on the host) and the row statuses come down (M bytes). A coalesced
  // batch is one launch: its parts' host rows are staged back to back, its
  // parts' GPU rows are addressed from the lowest part's pointer, and each
  // part's answer is placed where that part wants it.
  absl::Status Select(const Plan& plan, const SelectRows& rows,
                      const SelectResults& results) override {
    if (plan.workspace_bytes > d_workspace_.bytes()) {
      return absl::ResourceExhaustedError(absl::StrCat("plan needs ", plan.workspace_bytes,
                                                       " workspace bytes, worker has ",
                                                       d_workspace_.bytes()));
    }
    // A type the kernels do not serve is refused before anything is
    // uploaded, with the selector's own status (not a device failure).
    if (absl::Status s = CheckCudaScoreType(rows.dtype); !s.ok()) return s;
    // Every part of a batch is on this GPU, or none is (the engine only
    // coalesces rows of the same kind of source).
    const float* device_scores = LowestDeviceFloats(rows);
    if (absl::Status s = DeviceLost(Upload(rows, device_scores)); !s.ok()) return s;
    const bool device_lengths = rows.lengths == nullptr;
    const bool lone = rows.parts.size() == 1;
    // The scores' elements are of rows.dtype whatever the buffers' C++ type.
    const float* scores = device_scores != nullptr ? device_scores : d_scores_.get();
    const bool wide = rows.dtype == ScoreType::kFloat32;
    const RowBatch batch{
        .scores = wide ? scores : nullptr,
        .layout = Layout::kPacked,
        .row_offsets = d_offsets_.get(),
        .lengths = device_lengths && lone ? rows.parts.front().device_lengths : d_lengths_.get(),
        .num_rows = rows.num_rows,
        .width = device_lengths ? rows.width : plan.shape.max_width,
        .dtype = rows.dtype,
        .scores16 = wide ? nullptr : reinterpret_cast<const uint16_t*>(scores)};
    const bool targets = rows.parts.front().device_target != nullptr;
    const int32_t k = plan.shape.k;
    const OutputTarget* lone_target = lone ? rows.parts.front().device_target : nullptr;
    const bool indices_in_place = lone_target != nullptr && lone_target->row_stride == k;
    const OutputView out{.indices = indices_in_place ? lone_target->indices : d_indices_.get(),
                         .row_status = d_status_.get()};
    const RunContext context{.workspace = d_workspace_.get(),
                             .workspace_bytes = d_workspace_.bytes(),
                             .stream = stream_.get()};
    CudaGraphRunner* graph = GraphFor(plan, context);
    if (graph != nullptr) replays_.fetch_add(1, std::memory_order_relaxed);
    absl::Status run = graph != nullptr ? graph->Replay(batch, out, stream_.get())
                                        : selector_->Run(plan, batch, out, context);
    if (!run.ok()) {
      // A launch failure leaves the stream in an unknown state: when it does
      // not drain cleanly, the device is lost.
      if (absl::Status drained = DeviceLost(Synchronize()); !drained.ok()) {
        return absl::UnavailableError(
            absl::StrCat("select: ", run.message(), "; ", drained.message()));
      }
      return run;
    }
    const size_t outputs = static_cast<size_t>(rows.num_rows) * k;
    if (targets) {
      for (const RowPart& part : rows.parts) {
        if (absl::Status s = DeviceLost(PlaceOnDevice(batch, out, part, k, *part.device_target));
            !s.ok()) {
          return s;
        }
      }
    }
    // Values of rows read on the GPU are gathered there too (the host has
    // no copy of those scores).
    const bool gather_on_device = !targets && results.values != nullptr && device_scores != nullptr;
    if (gather_on_device) {
      const RowPart all{.first_row = 0, .num_rows = rows.num_rows};
      const OutputTarget values{.values = d_values_.get(), .row_stride = k};
      if (absl::Status s = DeviceLost(PlaceOnDevice(batch, out, all, k, values)); !s.ok()) {
        return s;
      }
    }
    for (const RowPart& part : rows.parts) {
      if (part.ordering.record == nullptr) continue;
      if (absl::Status s = DeviceLost(RecordEvent(part.ordering.record)); !s.ok()) return s;
    }
    if (absl::Status s =
            DeviceLost(Download(rows.num_rows, targets ? 0 : outputs,
                                gather_on_device ? outputs * ScoreTypeBytes(rows.dtype) : 0));
        !s.ok()) {
      return s;
    }
    std::memcpy(results.row_status, h_status_.get(), rows.num_rows * sizeof(RowStatus));
    if (targets) return absl::OkStatus();
    std::memcpy(results.indices, h_indices_.get(), outputs * sizeof(int32_t));
    if (gather_on_device) {
      std::memcpy(results.values, h_values_.get(), outputs * ScoreTypeBytes(rows.dtype));
    } else if (results.values != nullptr) {
      // The pinned staging still holds this batch's rows.
      GatherValues(h_scores_.get(), rows, k, results);
    }
    return absl::OkStatus();
  }

 private:
  CudaWorker(int ordinal, bool use_graphs, std::shared_ptr<CopyPool> copy_pool,
             CopyStores staging_stores, const RequestLimits& limits)
      : ordinal_(ordinal),
        use_graphs_(use_graphs),
        staging_stores_(staging_stores),
        // Every chunk of the largest batch: its bytes in kStagingChunkBytes
        // pieces, plus one partial piece per part (at most one per row).
        chunks_(static_cast<size_t>(limits.max_batch_bytes) / kStagingChunkBytes +
                static_cast<size_t>(limits.max_rows) + 1),
        staged_(chunks_.size()),
        copy_pool_(std::move(copy_pool)) {}

  // Every buffer a request can need, for the largest request `limits` allow:
  // pinned staging and its device twin for each input and output.
  absl::Status Allocate(const RequestLimits& limits, size_t workspace_bytes) {
    const size_t rows = limits.max_rows;
    const size_t outputs = rows * limits.max_k;
    const size_t floats = limits.max_batch_bytes / sizeof(float);
    absl::StatusOr<cuda::Stream> stream = cuda::CreateStream();
    if (!stream.ok()) return stream.status();
    stream_ = *std::move(stream);
    if (absl::Status s = AllocatePair(floats, d_scores_, h_scores_); !s.ok()) return s;
    if (absl::Status s = AllocatePair(rows, d_offsets_, h_offsets_); !s.ok()) return s;
    if (absl::Status s = AllocatePair(rows, d_lengths_, h_lengths_); !s.ok()) return s;
    if (absl::Status s = AllocatePair(outputs, d_indices_, h_indices_); !s.ok()) return s;
    if (absl::Status s = AllocatePair(rows, d_status_, h_status_); !s.ok()) return s;
    if (absl::Status s = AllocatePair(outputs, d_values_, h_values_); !s.ok()) return s;
    // The selector refuses a null workspace, even where a plan needs none.
    absl::StatusOr<cuda::DeviceBuffer<std::byte>> ws =
        cuda::AllocateDevice<std::byte>(std::max<size_t>(workspace_bytes, 1));
    if (!ws.ok()) return ws.status();
    d_workspace_ = *std::move(ws);
    return absl::OkStatus();
  }

  template <typename T>
  static absl::Status AllocatePair(size_t count, cuda::DeviceBuffer<T>& device,
                                   cuda::PinnedBuffer<T>& pinned) {
    absl::StatusOr<cuda::DeviceBuffer<T>> d = cuda::AllocateDevice<T>(count);
    if (!d.ok()) return d.status();
    device = *std::move(d);
    absl::StatusOr<cuda::PinnedBuffer<T>> h = cuda::AllocatePinned<T>(count);
    if (!h.ok()) return h.status();
    pinned = *std::move(h);
    return absl::OkStatus();
  }

  // The lowest of the parts' pointers on this GPU (the base the batch's
  // rows are addressed from), or nullptr for rows in host memory.
  static const float* LowestDeviceFloats(const SelectRows& rows) {
    const float* lowest = nullptr;
    for (const RowPart& part : rows.parts) {
      const float* p = part.source->InPlaceDeviceFloats();
      if (p == nullptr) return nullptr;
      if (lowest == nullptr || std::less<const float*>()(p, lowest)) lowest = p;
    }
    return lowest;
  }

  // The batch's one copy, for rows not already on this GPU: from each
  // part's source into pinned staging (so the uploads are true async DMA),
  // then host-to-device on the worker's stream. Every part's wait event is
  // enqueued first, so nothing of the batch runs before them. Rows on this
  // GPU (`device_base` set) get offsets from that base instead of staging.
  absl::Status Upload(const SelectRows& rows, const float* device_base) {
    if (absl::Status s = UseDevice(ordinal_); !s.ok()) return s;
    cudaStream_t stream = stream_.get();
    for (const RowPart& part : rows.parts) {
      if (part.ordering.wait == nullptr) continue;
      TOPK_CUDA_RETURN_IF_ERROR(
          cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(part.ordering.wait), 0));
    }
    const size_t m = rows.num_rows;
    if (device_base == nullptr) {
      if (absl::Status s = StageAndUpload(rows); !s.ok()) return s;
      std::memcpy(h_offsets_.get(), rows.row_offsets, m * sizeof(int64_t));
    } else {
      // One address space on the GPU: a part's rows are its offsets within
      // its own source, moved by where that source lies from the base.
      for (const RowPart& part : rows.parts) {
        const auto shift =
            static_cast<int64_t>((reinterpret_cast<uintptr_t>(part.source->InPlaceDeviceFloats()) -
                                  reinterpret_cast<uintptr_t>(device_base)) /
                                 ScoreTypeBytes(rows.dtype));
        for (int64_t r = part.first_row; r < part.first_row + part.num_rows; ++r) {
          h_offsets_.get()[r] = rows.row_offsets[r] - part.element_offset + shift;
        }
      }
    }
    TOPK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_offsets_.get(), h_offsets_.get(),
                                              m * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
    if (rows.lengths != nullptr) {
      std::memcpy(h_lengths_.get(), rows.lengths, m * sizeof(int32_t));
      TOPK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
          d_lengths_.get(), h_lengths_.get(), m * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
    } else if (rows.parts.size() > 1) {
      // Lengths on the GPU, one array per part: gathered there.
      for (const RowPart& part : rows.parts) {
        TOPK_CUDA_RETURN_IF_ERROR(
            cudaMemcpyAsync(d_lengths_.get() + part.first_row, part.device_lengths,
                            part.num_rows * sizeof(int32_t), cudaMemcpyDeviceToDevice, stream));
      }
    }
    return absl::OkStatus();
  }

  // The batch's host rows into pinned staging (each part at its element
  // offset) and up to the GPU, chunk by chunk: the copy threads stage
  // several chunks at once (one core cannot copy at the link's speed), and
  // every run of chunks staged in order goes up as one upload as soon as it
  // is, so the copy engine moves earlier chunks while later ones are staged.
  // One thread at a time enqueues (StagedChunks), in order: the driver
  // serialises calls on one stream anyway, and fewer calls cost less.
  absl::Status StageAndUpload(const SelectRows& rows) {
    size_t n = 0;
    for (const RowPart& part : rows.parts) {
      const size_t size = part.source->size_bytes();
      const size_t base = static_cast<size_t>(part.element_offset) * ScoreTypeBytes(rows.dtype);
      for (size_t from = 0; from < size; from += kStagingChunkBytes) {
        if (n == chunks_.size()) return absl::InternalError("staging: more chunks than planned");
        chunks_[n++] = {.source = part.source,
                        .from = from,
                        .to = base + from,
                        .bytes = std::min(kStagingChunkBytes, size - from)};
      }
    }
    auto* host = reinterpret_cast<std::byte*>(h_scores_.get());
    auto* device = reinterpret_cast<std::byte*>(d_scores_.get());
    cudaStream_t stream = stream_.get();
    std::atomic<int> first_error{cudaSuccess};
    const int ordinal = ordinal_;
    // Chunks [begin, end) up, one copy per run of them adjacent in staging
    // (parts are staged back to back, so normally one).
    const auto upload = [&](size_t begin, size_t end) {
      // The shared helpers serve every GPU: each selects this worker's
      // device before its first upload for it.
      thread_local int current = -1;
      cudaError_t error = cudaSuccess;
      if (current != ordinal) {
        error = cudaSetDevice(ordinal);
        if (error == cudaSuccess) current = ordinal;
      }
      for (size_t run = begin; run < end && error == cudaSuccess;) {
        size_t stop = run + 1;
        while (stop < end && chunks_[stop].to == chunks_[stop - 1].to + chunks_[stop - 1].bytes) {
          ++stop;
        }
        const size_t bytes = chunks_[stop - 1].to + chunks_[stop - 1].bytes - chunks_[run].to;
        error = cudaMemcpyAsync(device + chunks_[run].to, host + chunks_[run].to, bytes,
                                cudaMemcpyHostToDevice, stream);
        run = stop;
      }
      int expected = cudaSuccess;
      if (error != cudaSuccess) first_error.compare_exchange_strong(expected, error);
    };
    staged_.Reset(n);
    const CopyStores stores = staging_stores_;
    copy_pool_->Run(static_cast<int64_t>(n), copy_pool_->threads(), [&](int64_t i) {
      const StagingChunk& chunk = chunks_[i];
      chunk.source->CopyRange(chunk.from, chunk.bytes, host + chunk.to, stores);
      staged_.Staged(static_cast<size_t>(i), upload);
    });
    TOPK_CUDA_RETURN_IF_ERROR(static_cast<cudaError_t>(first_error.load()));
    if (staged_.handed_on() != n) return absl::InternalError("staging: a chunk was not uploaded");
    return absl::OkStatus();
  }

  // Indices (unless written in place), values gathered on the device (when
  // any, `value_bytes` of them) and row statuses back to pinned memory;
  // returns once they are.
  absl::Status Download(int64_t num_rows, size_t indices, size_t value_bytes) {
    cudaStream_t stream = stream_.get();
    if (indices > 0) {
      TOPK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h_indices_.get(), d_indices_.get(),
                                                indices * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                                stream));
    }
    if (value_bytes > 0) {
      TOPK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h_values_.get(), d_values_.get(), value_bytes,
                                                cudaMemcpyDeviceToHost, stream));
    }
    TOPK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h_status_.get(), d_status_.get(),
                                              num_rows * sizeof(RowStatus), cudaMemcpyDeviceToHost,
                                              stream));
    return Synchronize();
  }

  // `part`'s answer where `target` wants it on this GPU: indices at its
  // stride (unless the selector wrote them there already) and values
  // gathered from the rows.
  absl::Status PlaceOnDevice(const RowBatch& batch, const OutputView& out, const RowPart& part,
                             int32_t k, const OutputTarget& target) {
    const bool indices_placed = out.indices == target.indices || target.indices == nullptr;
    const int64_t first = part.first_row;
    return PlaceOutputOnDevice(
        {.indices = out.indices + first * k,
         .row_status = out.row_status + first,
         .scores = batch.dtype == ScoreType::kFloat32 ? static_cast<const void*>(batch.scores)
                                                      : static_cast<const void*>(batch.scores16),
         .dtype = batch.dtype,
         .row_offsets = batch.row_offsets + first,
         .num_rows = part.num_rows,
         .k = k,
         .target_indices = indices_placed ? nullptr : target.indices,
         .target_values = target.values,
         .stride = target.row_stride},
        stream_.get());
  }

  absl::Status RecordEvent(void* event) {
    TOPK_CUDA_RETURN_IF_ERROR(cudaEventRecord(static_cast<cudaEvent_t>(event), stream_.get()));
    return absl::OkStatus();
  }

  absl::Status Synchronize() {
    TOPK_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
    return absl::OkStatus();
  }

  // The captured graph of the plan's bucket, captured on first use (the one
  // allocation a bucket costs; the engine's plan buckets bound how many).
  // nullptr: run the selector directly (graphs off, or capture failed).
  CudaGraphRunner* GraphFor(const Plan& plan, const RunContext& context) {
    if (!use_graphs_) return nullptr;
    const PlanKey key = KeyOf(plan);
    if (auto it = graphs_.find(key); it != graphs_.end()) return it->second.get();
    absl::StatusOr<std::unique_ptr<CudaGraphRunner>> graph =
        CudaGraphRunner::Create(*selector_, plan, context);
    if (!graph.ok()) {
      capture_failures_.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("CUDA graph capture failed for k={} rows={} width={}: {}; running uncaptured",
                   key.k, key.max_rows, key.max_width, graph.status().ToString());
      graphs_.emplace(key, nullptr);
      return nullptr;
    }
    captures_.fetch_add(1, std::memory_order_relaxed);
    return graphs_.emplace(key, *std::move(graph)).first->second.get();
  }

  // A piece of a part's rows: bytes [from, from + bytes) of its source, at
  // byte `to` of the staging and of its device twin.
  struct StagingChunk {
    const RowSource* source = nullptr;
    size_t from = 0;
    size_t to = 0;
    size_t bytes = 0;
  };

  int ordinal_;
  bool use_graphs_;
  CopyStores staging_stores_;
  std::vector<StagingChunk> chunks_;  // sized at start
  StagedChunks staged_;               // as many as chunks_
  std::shared_ptr<CopyPool> copy_pool_;
  std::unique_ptr<CudaSelector> selector_;
  cuda::Stream stream_;
  cuda::DeviceBuffer<float> d_scores_;
  cuda::DeviceBuffer<int64_t> d_offsets_;
  cuda::DeviceBuffer<int32_t> d_lengths_;
  cuda::DeviceBuffer<int32_t> d_indices_;
  cuda::DeviceBuffer<RowStatus> d_status_;
  cuda::DeviceBuffer<float> d_values_;
  cuda::DeviceBuffer<std::byte> d_workspace_;
  cuda::PinnedBuffer<float> h_scores_;
  cuda::PinnedBuffer<int64_t> h_offsets_;
  cuda::PinnedBuffer<int32_t> h_lengths_;
  cuda::PinnedBuffer<int32_t> h_indices_;
  cuda::PinnedBuffer<RowStatus> h_status_;
  cuda::PinnedBuffer<float> h_values_;
  std::atomic<int64_t> captures_{0};
  std::atomic<int64_t> capture_failures_{0};
  std::atomic<int64_t> replays_{0};
  // Declared last so it is destroyed first: a graph runner synchronises the
  // worker's stream and refers to its buffers while it is torn down.
  absl::flat_hash_map<PlanKey, std::unique_ptr<CudaGraphRunner>> graphs_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerBackend>> CreateCudaWorker(int ordinal, bool use_graphs,
                                                                std::shared_ptr<CopyPool> copy_pool,
                                                                CopyStores staging_stores,
                                                                const RequestLimits& limits) {
  absl::StatusOr<std::unique_ptr<CudaWorker>> worker =
      CudaWorker::Create(ordinal, use_graphs, std::move(copy_pool), staging_stores, limits);
  if (!worker.ok()) return worker.status();
  return std::unique_ptr<WorkerBackend>(*std::move(worker));
}

#endif  // TOPK_HAVE_CUDA

}  // namespace topk::server
