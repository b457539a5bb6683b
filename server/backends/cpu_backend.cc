#include "server/backends/cpu_backend.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
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
        staging_(std::make_unique_for_overwrite<std::byte[]>(limits.max_batch_bytes)) {}

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
    // A coalesced batch is copied into staging (its parts' sources are
    // separate buffers); a lone request is read in place when it can be.
    const float* scores = StageParts(rows, Staging::kInPlaceWhenPossible, staging_.get());
    const RowBatch batch{.scores = scores,
                         .layout = Layout::kPacked,
                         .row_offsets = rows.row_offsets,
                         .lengths = rows.lengths,
                         .num_rows = rows.num_rows,
                         .width = plan.shape.max_width};
    const RunContext context{.workspace = workspace_.empty() ? nullptr : workspace_.data(),
                             .workspace_bytes = workspace_.size()};
    absl::Status status = selector_.Run(
        plan, batch, OutputView{.indices = results.indices, .row_status = results.row_status},
        context);
    if (status.ok() && results.values != nullptr) {
      GatherValues(scores, rows, plan.shape.k, results);
    }
    return status;
  }

 private:
  CpuSelector selector_;
  std::vector<std::byte> workspace_;
  // The one copy of rows whose source cannot be read in place.
  std::unique_ptr<std::byte[]> staging_;
};

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(int threads_per_worker) : threads_(threads_per_worker) {}

  std::string backend_name() const override { return "cpu"; }

  DeviceDescription description() const override {
    DeviceDescription description;
    description.name = absl::StrCat("cpu (", std::thread::hardware_concurrency(),
                                    " hardware threads, ", threads_, " per worker)");
    return description;
  }

  absl::StatusOr<std::unique_ptr<WorkerBackend>> CreateWorker(
      const RequestLimits& limits) override {
    auto worker = std::make_unique<CpuWorker>(threads_, limits);
    if (absl::Status s = worker->Allocate(limits); !s.ok()) return s;
    return worker;
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
