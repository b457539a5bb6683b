#include "server/engine/worker.h"

#include <cstring>
#include <string>

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
  const int64_t rows = RowCount(input);
  const int64_t k = input.k;
  absl::StatusOr<const Plan*> plan = plans_.Get(
      BucketOf(input.k, rows, input.max_length, input.options, limits_, input.dtype), *backend_);
  if (!plan.ok()) return plan.status();

  int64_t offset = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (!input.row_offsets.empty()) {
      row_offsets_[r] = input.row_offsets[r];
    } else {
      row_offsets_[r] = offset;
      offset += input.lengths[r];
    }
  }
  // A host target of stride K takes the selector's output as it is: the
  // answer is written in place. Any other host stride gets one copy of the
  // (small) answer below; a GPU target is the CUDA backend's to write.
  const OutputTarget* target = input.output_target;
  const bool host_target = target != nullptr && target->device_ordinal < 0;
  const bool in_place = host_target && target->row_stride == k;
  void* values = input.return_values ? values_.data() : nullptr;
  if (in_place && values != nullptr) values = target->values;
  const SelectRows select_rows{.source = input.rows,
                               .lengths = input.lengths.empty() ? nullptr : input.lengths.data(),
                               .row_offsets = row_offsets_.data(),
                               .num_rows = rows,
                               .total_elements = offset,
                               .device_lengths = input.device_lengths,
                               .width = input.max_length,
                               .ordering = input.ordering,
                               .dtype = input.dtype};
  const SelectResults results{
      .indices = in_place ? target->indices : indices_.data(),
      .values = values,
      .row_status = row_status_.data(),
      .device_target = target != nullptr && !host_target ? target : nullptr};

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
  // Lengths read on a GPU are not known here: name the row and the bound.
  const auto length = [&](int64_t r) {
    return input.lengths.empty()
               ? absl::StrCat("(on the GPU, bound width = ", input.max_length, ")")
               : absl::StrCat("= ", input.lengths[r]);
  };
  for (int64_t r = 0; r < rows; ++r) {
    if (row_status_[r] == RowStatus::kNan) {
      return absl::InvalidArgumentError(absl::StrCat(
          "scores: row ", r, " has a NaN in its valid prefix (lengths[", r, "] ", length(r), ")"));
    }
    if (row_status_[r] != RowStatus::kOk) {
      return absl::InvalidArgumentError(absl::StrCat("lengths[", r, "] ", length(r),
                                                     " was rejected by the backend (row ", r, ")"));
    }
  }
  if (target != nullptr) {
    if (host_target && !in_place) {
      CopyToHostTarget(*target, rows, k, input.return_values ? ScoreTypeBytes(input.dtype) : 0);
    }
    return absl::OkStatus();
  }
  output.indices = absl::MakeConstSpan(indices_.data(), rows * k);
  if (input.return_values) {
    output.values = absl::MakeConstSpan(reinterpret_cast<const std::byte*>(values_.data()),
                                        rows * k * ScoreTypeBytes(input.dtype));
  }
  return absl::OkStatus();
}

void Worker::CopyToHostTarget(const OutputTarget& target, int64_t rows, int64_t k,
                              size_t value_bytes) const {
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(target.indices + r * target.row_stride, indices_.data() + r * k,
                k * sizeof(int32_t));
    if (value_bytes > 0) {
      std::memcpy(static_cast<std::byte*>(target.values) + r * target.row_stride * value_bytes,
                  reinterpret_cast<const std::byte*>(values_.data()) + r * k * value_bytes,
                  k * value_bytes);
    }
  }
}

}  // namespace topk::server
