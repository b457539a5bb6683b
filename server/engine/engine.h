// The engine: per device a bounded request queue and a pool of persistent
// workers, over devices the composition root chose (server/backends/
// backend_factory.h). Everything is allocated by Create; Submit never
// allocates.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backends/backend.h"
#include "server/backends/backend_factory.h"
#include "server/engine/select_job.h"

namespace topk::server {

struct EngineOptions {
  int queue_depth = 64;  // per device
  RequestLimits limits;
};

// One device as the engine serves it, sampled now.
struct EngineDevice {
  DeviceDescription description;
  int workers = 0;
  bool usable = true;
  int64_t queue_depth = 0;
  int64_t in_flight = 0;
  int64_t memory_used_bytes = -1;  // -1: no device memory (the CPU)
  int64_t plan_cache_hits = 0;     // summed over the device's workers
  int64_t plan_cache_misses = 0;
  BackendCounters backend;  // summed over the device's workers
};

class Engine {
 public:
  // Starts `backends.workers_per_device` workers on every device of
  // `backends`, each with its own WorkerBackend sized for options.limits.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options,
                                                        Backends backends);
  ~Engine();  // Stop()

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Hands the job to the device with the shortest queue. Completes the job
  // at once with RESOURCE_EXHAUSTED when every queue is full, UNAVAILABLE
  // when no device is usable or the engine is stopping.
  void Submit(SelectJob* job);

  // Stops taking jobs, lets the workers finish what is queued, joins them.
  void Stop();

  // False after a sticky device error on every device.
  bool usable() const;
  const std::string& backend_name() const { return backend_name_; }
  const std::string& backend_reason() const { return backend_reason_; }
  const EngineOptions& options() const { return options_; }
  const RequestLimits& limits() const { return options_.limits; }
  std::vector<EngineDevice> devices() const;
  // Jobs waiting in the queues, and jobs on workers, right now.
  int64_t queue_depth() const;
  int64_t in_flight() const;

 private:
  struct Slot;
  explicit Engine(const EngineOptions& options);

  EngineOptions options_;
  std::string backend_name_;
  std::string backend_reason_;
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace topk::server
