#include "server/engine/cpu_backend.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "topk/cpu_selector.h"

namespace topk::server {
namespace {

class CpuWorker final : public WorkerBackend {
 public:
  explicit CpuWorker(int threads) : selector_(CpuSelectorConfig{.threads = threads}) {}

  // The workspace depends on the selector's thread count: probe this one.
  absl::Status Allocate(const EngineLimits& limits) {
    absl::StatusOr<size_t> bytes = MaxWorkspaceBytes(selector_, limits);
    if (!bytes.ok()) return bytes.status();
    workspace_.resize(*bytes);
    return absl::OkStatus();
  }

  absl::StatusOr<Plan> MakePlan(const ProblemShape& shape,
                                const SelectOptions& options) const override {
    return selector_.MakePlan(shape, options);
  }

  absl::Status Select(const Plan& plan, const HostRows& rows, int32_t* indices,
                      RowStatus* row_status) override {
    if (plan.workspace_bytes > workspace_.size()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "plan needs ", plan.workspace_bytes, " workspace bytes, worker has ", workspace_.size()));
    }
    // The request's bytes are read where they are: no staging copy on the CPU.
    const RowBatch batch{.scores = rows.scores,
                         .layout = Layout::kPacked,
                         .row_offsets = rows.row_offsets,
                         .lengths = rows.lengths,
                         .num_rows = rows.num_rows,
                         .width = plan.shape.max_width};
    const RunContext context{.workspace = workspace_.empty() ? nullptr : workspace_.data(),
                             .workspace_bytes = workspace_.size()};
    return selector_.Run(plan, batch, OutputView{.indices = indices, .row_status = row_status},
                         context);
  }

 private:
  CpuSelector selector_;
  std::vector<std::byte> workspace_;
};

class CpuDevice final : public Device {
 public:
  CpuDevice(int threads_per_worker) : threads_(threads_per_worker) {}

  std::string backend_name() const override { return "cpu"; }

  DeviceDescription description() const override {
    DeviceDescription description;
    description.name = absl::StrCat("cpu (", std::thread::hardware_concurrency(),
                                    " hardware threads, ", threads_, " per worker)");
    return description;
  }

  absl::StatusOr<std::unique_ptr<WorkerBackend>> CreateWorker(const EngineLimits& limits) override {
    auto worker = std::make_unique<CpuWorker>(threads_);
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
