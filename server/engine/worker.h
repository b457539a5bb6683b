// One persistent engine worker: takes jobs from its device's queue, with
// their compatible batch-mates when coalescing is on, and serves each batch
// in one call of its own WorkerBackend, with its own preallocated host
// buffers.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "server/backends/backend.h"
#include "server/engine/batch_sizes.h"
#include "server/engine/bounded_queue.h"
#include "server/engine/busy_window.h"
#include "server/engine/plan_cache.h"
#include "server/engine/select_job.h"

namespace topk::server {

struct QueuedJob {
  SelectJob* job = nullptr;
  int64_t enqueued_us = 0;  // SteadyNowUs() at Submit
};

// Shared by a device's workers.
struct DeviceState {
  explicit DeviceState(size_t queue_depth) : queue(queue_depth) {}
  BoundedQueue<QueuedJob> queue;
  std::atomic<bool> usable{true};
  std::atomic<int64_t> in_flight{0};
  int workers = 0;  // set before the workers start
  // Workers serving a batch now; the others are idle (or gathering).
  std::atomic<int> serving{0};
  // Jobs in the batch this device's workers served last: more than one means
  // requests are arriving together, so waiting for batch-mates pays.
  std::atomic<int64_t> last_batch_jobs{0};
  BatchSizes batches;
  // How busy the workers have been lately (the saturation metric).
  BusyWindow busy;
  // Held by the worker gathering a batch (coalescing only).
  absl::Mutex gather_turn;
  // Where a job goes that this device can no longer serve (another usable
  // device, or an answer): set by the engine before the workers start.
  std::function<void(const QueuedJob&)> reroute;
};

struct WorkerOptions {
  RequestLimits limits;
  int64_t max_queue_delay_us = 0;  // 0: no coalescing
};

class Worker {
 public:
  Worker(std::unique_ptr<WorkerBackend> backend, const WorkerOptions& options, DeviceState* device);
  ~Worker();  // joins; the queue must be closed first

  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void Start();
  void Join();

  // For the metrics (any thread).
  const PlanCache& plans() const { return plans_; }
  BackendCounters backend_counters() const { return backend_->counters(); }

 private:
  void Loop();
  // The next batch into batch_: a job and, with coalescing, its mates.
  // False once the queue is closed and empty.
  bool TakeBatch();
  bool TakeFirst();
  // Adds compatible queued jobs to batch_ until the first job's delay is
  // spent, the batch is full, or it holds its fair share.
  void Gather();
  // The most jobs this batch should hold with `batch_jobs` in it. With
  // idle peers, the jobs waiting (its own and the queue's) spread over the
  // idle workers, this one included, and no wait: the peers serve the rest
  // at once instead of this worker serializing them. With every other
  // worker busy, all it can take, waiting up to the delay for them.
  int64_t FairShare(int64_t batch_jobs) const;
  // Answers cancelled jobs (and every job, when the device is unusable),
  // then serves the rest in one call, or one by one when that call failed
  // as a whole.
  void ServeBatch();
  // Serves `jobs` in one backend call and completes each with its own
  // status; on an error of the call as a whole completes none and returns it.
  absl::Status RunBatch(absl::Span<const QueuedJob> jobs, int64_t start_us);
  // Lays the jobs' rows out as one batch in parts_, lengths_ and
  // row_offsets_; returns the batch's rows.
  SelectRows LayOut(absl::Span<const QueuedJob> jobs);
  // A job's answer (its part's rows of the batch) checked row by row,
  // placed where it goes, and handed to the job with `output`'s timings.
  void Finish(SelectJob& job, const RowPart& part, bool answered_in_place, SelectOutput& output);
  // Rows [first, first + rows) of the answer from the worker's buffers into
  // a host target; `value_bytes`: the size of one value (0: no values).
  void CopyToHostTarget(const OutputTarget& target, int64_t first, int64_t rows, int64_t k,
                        size_t value_bytes) const;

  std::unique_ptr<WorkerBackend> backend_;
  WorkerOptions options_;
  DeviceState* device_;
  PlanCache plans_;
  int64_t max_jobs_;  // per batch
  // Sized for the limits at construction; never grown afterwards.
  std::vector<QueuedJob> batch_;
  std::vector<RowPart> parts_;
  std::vector<int32_t> lengths_;
  std::vector<int64_t> row_offsets_;
  std::vector<int32_t> indices_;
  std::vector<float> values_;  // M x K of any score type (at most 4 bytes each)
  std::vector<RowStatus> row_status_;
  std::thread thread_;
};

}  // namespace topk::server
