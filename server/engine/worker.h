// One persistent engine worker: takes jobs from its device's queue and runs
// them on its own WorkerBackend with its own preallocated host buffers.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "server/backends/backend.h"
#include "server/engine/bounded_queue.h"
#include "server/engine/plan_cache.h"
#include "server/engine/select_job.h"

namespace topk::server {

struct QueuedJob {
  SelectJob* job = nullptr;
  int64_t enqueued_us = 0;  // SteadyNowUs()
};

// Shared by a device's workers.
struct DeviceState {
  explicit DeviceState(size_t queue_depth) : queue(queue_depth) {}
  BoundedQueue<QueuedJob> queue;
  std::atomic<bool> usable{true};
  std::atomic<int64_t> in_flight{0};
};

class Worker {
 public:
  Worker(std::unique_ptr<WorkerBackend> backend, const RequestLimits& limits, DeviceState* device);
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
  void Serve(const QueuedJob& queued);
  absl::Status Run(const SelectInput& input, SelectOutput& output);
  // The answer from the worker's buffers into a host target of stride > K.
  // `value_bytes`: the size of one value (0: no values).
  void CopyToHostTarget(const OutputTarget& target, int64_t rows, int64_t k,
                        size_t value_bytes) const;

  std::unique_ptr<WorkerBackend> backend_;
  RequestLimits limits_;
  DeviceState* device_;
  PlanCache plans_;
  // Sized for the limits at construction; never grown afterwards.
  std::vector<int64_t> row_offsets_;
  std::vector<int32_t> indices_;
  std::vector<float> values_;  // M x K of any score type (at most 4 bytes each)
  std::vector<RowStatus> row_status_;
  std::thread thread_;
};

}  // namespace topk::server
