#include "server/engine/worker.h"

#include "absl/strings/str_cat.h"
#include "server/engine/clock.h"
#include "spdlog/spdlog.h"

namespace topk::server {
namespace {

// Plans stay cached per worker; this bounds the map for adversarial K mixes.
constexpr size_t kPlanCacheEntries = 256;

}  // namespace

Worker::Worker(std::unique_ptr<WorkerBackend> backend, const RequestLimits& limits,
               DeviceState* device)
    : backend_(std::move(backend)),
      limits_(limits),
      device_(device),
      plans_(kPlanCacheEntries),
      row_offsets_(limits.max_rows),
      indices_(limits.max_rows * limits.max_k),
      values_(limits.max_rows * limits.max_k),
      row_status_(limits.max_rows) {}

Worker::~Worker() { Join(); }

void Worker::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Worker::Join() {
  if (thread_.joinable()) thread_.join();
}

void Worker::Loop() {
  while (std::optional<QueuedJob> job = device_->queue.Pop()) {
    device_->in_flight.fetch_add(1, std::memory_order_relaxed);
    Serve(*job);
    device_->in_flight.fetch_sub(1, std::memory_order_relaxed);
  }
}

void Worker::Serve(const QueuedJob& queued) {
  SelectJob& job = *queued.job;
  SelectOutput output;
  output.timings.queue_us = SteadyNowUs() - queued.enqueued_us;
  if (job.IsCancelled()) {
    job.Complete(absl::CancelledError("the client cancelled the request while it was queued"),
                 output);
    return;
  }
  if (!device_->usable.load(std::memory_order_acquire)) {
    job.Complete(absl::UnavailableError("the device is unusable after an earlier error"), output);
    return;
  }
  const absl::Status status = Run(job.input(), output);
  job.Complete(status, output);
}

absl::Status Worker::Run(const SelectInput& input, SelectOutput& output) {
  const int64_t rows = static_cast<int64_t>(input.lengths.size());
  const int64_t k = input.k;
  absl::StatusOr<const Plan*> plan =
      plans_.Get(BucketOf(input.k, rows, input.max_length, input.options, limits_), *backend_);
  if (!plan.ok()) return plan.status();

  int64_t offset = 0;
  for (int64_t r = 0; r < rows; ++r) {
    row_offsets_[r] = offset;
    offset += input.lengths[r];
  }
  const SelectRows select_rows{.source = input.rows,
                               .lengths = input.lengths.data(),
                               .row_offsets = row_offsets_.data(),
                               .num_rows = rows,
                               .total_elements = offset};
  const SelectResults results{.indices = indices_.data(),
                              .values = input.return_values ? values_.data() : nullptr,
                              .row_status = row_status_.data()};

  const int64_t start_us = SteadyNowUs();
  absl::Status status = backend_->Select(**plan, select_rows, results);
  output.timings.device_us = SteadyNowUs() - start_us;
  if (!status.ok()) {
    if (absl::IsUnavailable(status)) {
      // A device error is sticky: the context may be corrupt, so stop using
      // it rather than return wrong answers.
      if (device_->usable.exchange(false)) {
        spdlog::critical("device marked unusable: {}", status.ToString());
      }
    }
    return status;
  }
  for (int64_t r = 0; r < rows; ++r) {
    if (row_status_[r] == RowStatus::kNan) {
      return absl::InvalidArgumentError(absl::StrCat("scores: row ", r,
                                                     " has a NaN in its valid prefix (lengths[", r,
                                                     "] = ", input.lengths[r], ")"));
    }
    if (row_status_[r] != RowStatus::kOk) {
      return absl::InvalidArgumentError(
          absl::StrCat("lengths[", r, "] = ", input.lengths[r], " was rejected by the backend"));
    }
  }
  output.indices = absl::MakeConstSpan(indices_.data(), rows * k);
  if (input.return_values) output.values = absl::MakeConstSpan(values_.data(), rows * k);
  return absl::OkStatus();
}

}  // namespace topk::server
