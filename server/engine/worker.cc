#include "server/engine/worker.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/backends/plan_buckets.h"
#include "server/engine/clock.h"
#include "server/engine/coalescing.h"
#include "spdlog/spdlog.h"

namespace topk::server {
namespace {

// Plans stay cached per worker; this bounds the map for adversarial K mixes.
constexpr size_t kPlanCacheEntries = 256;

void CompleteAll(absl::Span<const QueuedJob> jobs, const absl::Status& status, int64_t start_us) {
  for (const QueuedJob& queued : jobs) {
    SelectOutput output;
    output.timings.queue_us = start_us - queued.enqueued_us;
    queued.job->Complete(status, output);
  }
}

}  // namespace

Worker::Worker(std::unique_ptr<WorkerBackend> backend, const WorkerOptions& options,
               DeviceState* device)
    : backend_(std::move(backend)),
      options_(options),
      device_(device),
      plans_(kPlanCacheEntries),
      // A batch never holds more jobs than rows (every job has one), nor
      // more than the queue can hold besides its first.
      max_jobs_(std::min<int64_t>(options.limits.max_rows,
                                  static_cast<int64_t>(device->queue.capacity()) + 1)),
      lengths_(options.limits.max_rows),
      row_offsets_(options.limits.max_rows),
      indices_(options.limits.max_rows * options.limits.max_k),
      values_(options.limits.max_rows * options.limits.max_k),
      row_status_(options.limits.max_rows) {
  batch_.reserve(max_jobs_);
  parts_.reserve(max_jobs_);
}

Worker::~Worker() { Join(); }

void Worker::Start() {
  thread_ = std::thread([this] {
    // Named, so per-thread CPU time (top -H, /proc/PID/task) tells the
    // workers from gRPC's threads.
    pthread_setname_np(pthread_self(), "topk-worker");
    Loop();
  });
}

void Worker::Join() {
  if (thread_.joinable()) thread_.join();
}

void Worker::Loop() {
  while (TakeBatch()) {
    const auto jobs = static_cast<int64_t>(batch_.size());
    device_->serving.fetch_add(1, std::memory_order_relaxed);
    const int64_t start_us = SteadyNowUs();
    ServeBatch();
    device_->busy.AddBusy(start_us, SteadyNowUs());
    device_->serving.fetch_sub(1, std::memory_order_relaxed);
    device_->in_flight.fetch_sub(jobs, std::memory_order_relaxed);
  }
}

bool Worker::TakeBatch() {
  batch_.clear();
  if (options_.max_queue_delay_us == 0) return TakeFirst();
  // One worker of a device gathers at a time: an idle worker waits its turn
  // instead of taking the next job alone while another is still gathering,
  // so a burst fills one batch as far as the delay allows.
  absl::MutexLock turn(&device_->gather_turn);
  if (!TakeFirst()) return false;
  Gather();
  return true;
}

bool Worker::TakeFirst() {
  std::optional<QueuedJob> job = device_->queue.Pop();
  if (!job.has_value()) return false;
  batch_.push_back(*job);
  device_->in_flight.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void Worker::Gather() {
  const SelectInput& lead = batch_.front().job->input();
  BatchFootprint footprint;
  Add(lead, footprint);
  // The delay counts from Submit: a job that already waited that long for
  // a worker takes only the batch-mates queued by now. A job that finds the
  // device idle, nothing else queued and the last batch alone has no
  // batch-mates coming (a lone client): it does not wait at all.
  const bool alone = device_->serving.load(std::memory_order_relaxed) == 0 &&
                     device_->queue.size() == 0 &&
                     device_->last_batch_jobs.load(std::memory_order_relaxed) <= 1;
  const int64_t deadline_us = alone ? 0 : batch_.front().enqueued_us + options_.max_queue_delay_us;
  const auto joins = [&](const QueuedJob& queued) {
    return CanJoin(lead, queued.job->input(), footprint, options_.limits, max_jobs_);
  };
  while (footprint.jobs < max_jobs_ && footprint.rows < options_.limits.max_rows &&
         footprint.jobs < FairShare(footprint.jobs)) {
    const int64_t left_us = std::max<int64_t>(0, deadline_us - SteadyNowUs());
    std::optional<QueuedJob> next =
        device_->queue.TakeFirstMatching(joins, absl::Microseconds(left_us));
    if (!next.has_value()) break;
    Add(next->job->input(), footprint);
    batch_.push_back(*next);
    device_->in_flight.fetch_add(1, std::memory_order_relaxed);
  }
}

int64_t Worker::FairShare(int64_t batch_jobs) const {
  const int idle = device_->workers - device_->serving.load(std::memory_order_relaxed);
  if (idle <= 1) return max_jobs_;  // no one else to leave work to: wait for mates
  const auto waiting = batch_jobs + static_cast<int64_t>(device_->queue.size());
  return (waiting + idle - 1) / idle;
}

void Worker::ServeBatch() {
  const int64_t start_us = SteadyNowUs();
  size_t live = 0;
  for (const QueuedJob& queued : batch_) {
    if (queued.job->IsCancelled()) {
      CompleteAll({&queued, 1},
                  absl::CancelledError("the client cancelled the request while it was queued"),
                  start_us);
    } else if (!device_->usable.load(std::memory_order_acquire)) {
      device_->reroute(queued);
    } else {
      batch_[live++] = queued;
    }
  }
  batch_.resize(live);  // shrinks: no allocation
  if (live == 0) return;
  device_->last_batch_jobs.store(static_cast<int64_t>(live), std::memory_order_relaxed);
  const absl::Status status = RunBatch(batch_, start_us);
  if (status.ok()) return;
  if (live == 1 || absl::IsUnavailable(status)) {
    CompleteAll(batch_, status, start_us);
    return;
  }
  // The call failed as a whole, so the failure cannot be laid on one job:
  // each is served alone and gets its own status.
  for (const QueuedJob& queued : batch_) {
    if (!device_->usable.load(std::memory_order_acquire)) {
      device_->reroute(queued);
      continue;
    }
    const absl::Status alone = RunBatch({&queued, 1}, start_us);
    if (!alone.ok()) CompleteAll({&queued, 1}, alone, start_us);
  }
}

SelectRows Worker::LayOut(absl::Span<const QueuedJob> jobs) {
  parts_.clear();
  const bool host_lengths = jobs.front().job->input().device_lengths == nullptr;
  int64_t rows = 0;
  int64_t elements = 0;
  int64_t width = 0;
  for (const QueuedJob& queued : jobs) {
    const SelectInput& input = queued.job->input();
    const int64_t m = RowCount(input);
    const OutputTarget* target = input.output_target;
    parts_.push_back(
        {.source = input.rows,
         .first_row = rows,
         .num_rows = m,
         .element_offset = elements,
         .device_lengths = input.device_lengths,
         .ordering = input.ordering,
         .device_target = target != nullptr && target->device_ordinal >= 0 ? target : nullptr});
    int64_t packed = elements;
    for (int64_t r = 0; r < m; ++r) {
      if (host_lengths) lengths_[rows + r] = input.lengths[r];
      if (!input.row_offsets.empty()) {
        row_offsets_[rows + r] = elements + input.row_offsets[r];
      } else {
        row_offsets_[rows + r] = packed;
        packed += input.lengths[r];
      }
    }
    elements += SourceElements(input);
    rows += m;
    width = std::max<int64_t>(width, input.max_length);
  }
  return SelectRows{.parts = parts_,
                    .lengths = host_lengths ? lengths_.data() : nullptr,
                    .row_offsets = row_offsets_.data(),
                    .num_rows = rows,
                    .total_elements = elements,
                    .width = width,
                    .dtype = jobs.front().job->input().dtype};
}

absl::Status Worker::RunBatch(absl::Span<const QueuedJob> jobs, int64_t start_us) {
  const SelectInput& lead = jobs.front().job->input();
  const SelectRows rows = LayOut(jobs);
  absl::StatusOr<const Plan*> plan = plans_.Get(
      BucketOf(lead.k, rows.num_rows, rows.width, lead.options, options_.limits, lead.dtype),
      *backend_);
  if (!plan.ok()) return plan.status();

  // A lone job's host target of stride K takes the selector's output as it
  // is: the answer is written in place. Every other host target gets one
  // copy of its (small) answer in Finish; a GPU target is the CUDA
  // backend's to write.
  const OutputTarget* target = lead.output_target;
  const bool in_place = jobs.size() == 1 && target != nullptr && target->device_ordinal < 0 &&
                        target->row_stride == lead.k;
  void* values = lead.return_values ? values_.data() : nullptr;
  if (in_place && values != nullptr) values = target->values;
  const SelectResults results{.indices = in_place ? target->indices : indices_.data(),
                              .values = values,
                              .row_status = row_status_.data()};

  const int64_t call_us = SteadyNowUs();
  const absl::Status status = backend_->Select(**plan, rows, results);
  const SelectTimings timings{.device_us = SteadyNowUs() - call_us,
                              .batch_requests = static_cast<int32_t>(jobs.size())};
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
  device_->batches.Record(static_cast<int64_t>(jobs.size()));
  for (size_t j = 0; j < jobs.size(); ++j) {
    SelectOutput output;
    output.timings = timings;
    output.timings.queue_us = start_us - jobs[j].enqueued_us;
    Finish(*jobs[j].job, parts_[j], in_place, output);
  }
  return absl::OkStatus();
}

void Worker::Finish(SelectJob& job, const RowPart& part, bool answered_in_place,
                    SelectOutput& output) {
  const SelectInput& input = job.input();
  const int64_t first = part.first_row;
  const int64_t rows = part.num_rows;
  const int64_t k = input.k;
  // Rows are named as the job numbered them. Lengths read on a GPU are not
  // known here: name the row and the bound.
  const auto length = [&](int64_t r) {
    return input.lengths.empty()
               ? absl::StrCat("(on the GPU, bound width = ", input.max_length, ")")
               : absl::StrCat("= ", input.lengths[r]);
  };
  for (int64_t r = 0; r < rows; ++r) {
    const RowStatus status = row_status_[first + r];
    if (status == RowStatus::kNan) {
      job.Complete(absl::InvalidArgumentError(
                       absl::StrCat("scores: row ", r, " has a NaN in its valid prefix (lengths[",
                                    r, "] ", length(r), ")")),
                   output);
      return;
    }
    if (status != RowStatus::kOk) {
      job.Complete(
          absl::InvalidArgumentError(absl::StrCat("lengths[", r, "] ", length(r),
                                                  " was rejected by the backend (row ", r, ")")),
          output);
      return;
    }
  }
  const OutputTarget* target = input.output_target;
  if (target != nullptr) {
    if (target->device_ordinal < 0 && !answered_in_place) {
      CopyToHostTarget(*target, first, rows, k,
                       input.return_values ? ScoreTypeBytes(input.dtype) : 0);
    }
    job.Complete(absl::OkStatus(), output);
    return;
  }
  output.indices = absl::MakeConstSpan(indices_.data() + first * k, rows * k);
  if (input.return_values) {
    const int64_t value_bytes = ScoreTypeBytes(input.dtype);
    output.values = absl::MakeConstSpan(
        reinterpret_cast<const std::byte*>(values_.data()) + first * k * value_bytes,
        rows * k * value_bytes);
  }
  job.Complete(absl::OkStatus(), output);
}

void Worker::CopyToHostTarget(const OutputTarget& target, int64_t first, int64_t rows, int64_t k,
                              size_t value_bytes) const {
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(target.indices + r * target.row_stride, indices_.data() + (first + r) * k,
                k * sizeof(int32_t));
    if (value_bytes > 0) {
      std::memcpy(
          static_cast<std::byte*>(target.values) + r * target.row_stride * value_bytes,
          reinterpret_cast<const std::byte*>(values_.data()) + (first + r) * k * value_bytes,
          k * value_bytes);
    }
  }
}

}  // namespace topk::server
