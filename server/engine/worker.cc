#include "server/engine/worker.h"

#include <chrono>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/metrics.h"
#include "spdlog/spdlog.h"

namespace topk::server {
namespace {

// Plans stay cached per worker; this bounds the map for adversarial K mixes.
constexpr size_t kPlanCacheEntries = 256;

}  // namespace

int64_t SteadyNowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Worker::Worker(std::unique_ptr<WorkerBackend> backend, const EngineLimits& limits,
               DeviceState* device, Metrics* metrics)
    : backend_(std::move(backend)),
      limits_(limits),
      device_(device),
      metrics_(metrics),
      plans_(kPlanCacheEntries),
      row_offsets_(limits.max_rows),
      indices_(limits.max_rows * limits.max_k),
      values_(limits.max_rows * limits.max_k),
      row_status_(limits.max_rows),
      // Virtual until touched: a worker that only sees small requests never
      // makes the whole max_batch_bytes resident.
      staging_(std::make_unique_for_overwrite<float[]>(
          backend_->stages_scores() ? 1 : limits.max_batch_bytes / sizeof(float) + 1)) {}

Worker::~Worker() { Join(); }

void Worker::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Worker::Join() {
  if (thread_.joinable()) thread_.join();
}

void Worker::Loop() {
  while (std::optional<QueuedJob> job = device_->queue.Pop()) {
    if (metrics_ != nullptr) metrics_->AddQueueDepth(-1);
    device_->in_flight.fetch_add(1, std::memory_order_relaxed);
    if (metrics_ != nullptr) metrics_->AddInFlight(1);
    Serve(*job);
    device_->in_flight.fetch_sub(1, std::memory_order_relaxed);
    if (metrics_ != nullptr) metrics_->AddInFlight(-1);
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
  const float* scores = reinterpret_cast<const float*>(input.scores.data());
  const ScoreSource* source = input.source;
  if (source != nullptr && !backend_->stages_scores()) {
    // The one copy of the payload (a raw gRPC buffer) lands in the worker's
    // staging, which was reserved at start and is only touched as used.
    source->CopyTo(reinterpret_cast<char*>(staging_.get()));
    scores = staging_.get();
    source = nullptr;
  } else if (source == nullptr && reinterpret_cast<uintptr_t>(scores) % alignof(float) != 0) {
    // The selectors need 4-byte aligned rows; gRPC's buffers always are.
    std::memcpy(staging_.get(), input.scores.data(), input.scores.size());
    scores = staging_.get();
  }
  const HostRows host_rows{.scores = scores,
                           .source = source,
                           .lengths = input.lengths.data(),
                           .row_offsets = row_offsets_.data(),
                           .num_rows = rows,
                           .total_elements = offset};

  const int64_t start_us = SteadyNowUs();
  absl::Status status = backend_->Select(**plan, host_rows, indices_.data(), row_status_.data());
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
  if (input.return_values) {
    if (scores == nullptr) scores = backend_->staged_scores();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = scores + row_offsets_[r];
      const int32_t* idx = indices_.data() + r * k;
      float* val = values_.data() + r * k;
      for (int64_t j = 0; j < k; ++j) val[j] = idx[j] >= 0 ? row[idx[j]] : nan;
    }
    output.values = absl::MakeConstSpan(values_.data(), rows * k);
  }
  return absl::OkStatus();
}

}  // namespace topk::server
