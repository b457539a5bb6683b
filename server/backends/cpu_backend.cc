#include "server/backends/cpu_backend.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iterator>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/cpu_channel.h"
#include "server/backends/plan_buckets.h"
#include "topk/cpu_selector.h"

namespace topk::server {
namespace {

class CpuWorker final : public WorkerBackend {
 public:
  CpuWorker(int threads, const RequestLimits& limits)
      : selector_(CpuSelectorConfig{.threads = threads}),
        // Virtual until touched: a worker that only sees small requests never
        // makes the whole max_batch_bytes resident.
        staging_(std::make_unique_for_overwrite<std::byte[]>(limits.max_batch_bytes)),
        shifted_offsets_(limits.max_rows) {}

  // The workspace depends on the selector's thread count: probe this one.
  absl::Status Allocate(const RequestLimits& limits) {
    absl::StatusOr<size_t> bytes = MaxWorkspaceBytes(selector_, limits);
    if (!bytes.ok()) return bytes.status();
    workspace_.resize(*bytes);
    return absl::OkStatus();
  }

  absl::StatusOr<Plan> MakePlan(const ProblemShape& shape,
                                const SelectOptions& options) const override {
    return selector_.MakePlan(shape, options);
  }

  absl::Status Select(const Plan& plan, const SelectRows& rows,
                      const SelectResults& results) override {
    if (plan.workspace_bytes > workspace_.size()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "plan needs ", plan.workspace_bytes, " workspace bytes, worker has ", workspace_.size()));
    }
    // Rows are read where they are when every part's source holds them in
    // place: a batch's parts are separate buffers in one flat address
    // space, so its rows are addressed from the lowest part's pointer (as
    // the CUDA backend does on the GPU). Anything else is copied into
    // staging once, the parts back to back.
    SelectRows read = rows;
    const float* scores = rows.parts.size() > 1 ? LowestInPlace(rows) : nullptr;
    if (scores != nullptr) {
      for (const RowPart& part : rows.parts) {
        const auto shift =
            static_cast<int64_t>((reinterpret_cast<uintptr_t>(part.source->InPlaceHostFloats()) -
                                  reinterpret_cast<uintptr_t>(scores)) /
                                 ScoreTypeBytes(rows.dtype));
        for (int64_t r = part.first_row; r < part.first_row + part.num_rows; ++r) {
          shifted_offsets_[r] = rows.row_offsets[r] - part.element_offset + shift;
        }
      }
      read.row_offsets = shifted_offsets_.data();
    } else {
      scores = StageParts(rows, Staging::kInPlaceWhenPossible, staging_.get());
    }
    // The pointers are float-typed and float-aligned whatever the type: a
    // 16-bit batch reads the same bytes as its raw patterns.
    const bool wide = rows.dtype == ScoreType::kFloat32;
    const RowBatch batch{.scores = wide ? scores : nullptr,
                         .layout = Layout::kPacked,
                         .row_offsets = read.row_offsets,
                         .lengths = rows.lengths,
                         .num_rows = rows.num_rows,
                         .width = plan.shape.max_width,
                         .dtype = rows.dtype,
                         .scores16 = wide ? nullptr : reinterpret_cast<const uint16_t*>(scores)};
    const RunContext context{.workspace = workspace_.empty() ? nullptr : workspace_.data(),
                             .workspace_bytes = workspace_.size()};
    absl::Status status = selector_.Run(
        plan, batch, OutputView{.indices = results.indices, .row_status = results.row_status},
        context);
    if (status.ok() && results.values != nullptr) {
      GatherValues(scores, read, plan.shape.k, results);
    }
    return status;
  }

 private:
  // The lowest of the parts' host floats in place, or nullptr when any part
  // has to be copied.
  static const float* LowestInPlace(const SelectRows& rows) {
    const float* lowest = nullptr;
    for (const RowPart& part : rows.parts) {
      const float* p = part.source->InPlaceHostFloats();
      if (p == nullptr) return nullptr;
      if (lowest == nullptr || std::less<const float*>()(p, lowest)) lowest = p;
    }
    return lowest;
  }

  CpuSelector selector_;
  std::vector<std::byte> workspace_;
  // The one copy of rows whose source cannot be read in place.
  std::unique_ptr<std::byte[]> staging_;
  std::vector<int64_t> shifted_offsets_;  // a batch's, read in place
};

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(int threads_per_worker) : threads_(threads_per_worker) {}

  std::string backend_name() const override { return "cpu"; }

  DeviceDescription description() const override {
    DeviceDescription description;
    description.name = absl::StrCat("cpu (", std::thread::hardware_concurrency(),
                                    " hardware threads, ", threads_, " per worker)");
    description.score_types.assign(std::begin(kAllScoreTypes), std::end(kAllScoreTypes));
    return description;
  }

  absl::StatusOr<std::unique_ptr<WorkerBackend>> CreateWorker(
      const RequestLimits& limits) override {
    auto worker = std::make_unique<CpuWorker>(threads_, limits);
    if (absl::Status s = worker->Allocate(limits); !s.ok()) return s;
    return worker;
  }

  absl::StatusOr<std::unique_ptr<ChannelExecutor>> OpenChannel(const ChannelSpec& spec) override {
    return MakeCpuChannelExecutor(spec, threads_);
  }

 private:
  int threads_;
};

}  // namespace

std::unique_ptr<Device> MakeCpuDevice(int threads_per_worker, int workers) {
  if (threads_per_worker <= 0) {
    const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    threads_per_worker = std::max(1, hw / std::max(1, workers));
  }
  return std::make_unique<CpuDevice>(threads_per_worker);
}

}  // namespace topk::server
