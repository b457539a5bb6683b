// One persistent engine worker: takes jobs from its device's queue and runs
// them on its own WorkerBackend with its own preallocated host buffers.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "server/engine/backend.h"
#include "server/engine/bounded_queue.h"
#include "server/engine/job.h"
#include "server/engine/plan_cache.h"

namespace topk::server {

class Metrics;

struct QueuedJob {
  SelectJob* job = nullptr;
  int64_t enqueued_us = 0;  // steady clock
};

// Shared by a device's workers.
struct DeviceState {
  explicit DeviceState(size_t queue_depth) : queue(queue_depth) {}
  BoundedQueue<QueuedJob> queue;
  std::atomic<bool> usable{true};
  std::atomic<int64_t> in_flight{0};
};

int64_t SteadyNowUs();

class Worker {
 public:
  Worker(std::unique_ptr<WorkerBackend> backend, const EngineLimits& limits, DeviceState* device,
         Metrics* metrics);
  ~Worker();  // joins; the queue must be closed first

  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void Start();
  void Join();

 private:
  void Loop();
  void Serve(const QueuedJob& queued);
  absl::Status Run(const SelectInput& input, SelectOutput& output);

  std::unique_ptr<WorkerBackend> backend_;
  EngineLimits limits_;
  DeviceState* device_;
  Metrics* metrics_;
  PlanCache plans_;
  // Sized for the limits at construction; never grown afterwards.
  std::vector<int64_t> row_offsets_;
  std::vector<int32_t> indices_;
  std::vector<float> values_;
  std::vector<RowStatus> row_status_;
  // Host copy of the scores for backends that read host memory, when they
  // arrive as a ScoreSource (or misaligned). max_batch_bytes, untouched at start.
  std::unique_ptr<float[]> staging_;
  std::thread thread_;
};

}  // namespace topk::server
