// The engine: per device a bounded request queue and a pool of persistent
// workers. Everything is allocated by Create; Submit never allocates.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/engine/backend.h"
#include "server/engine/job.h"

namespace topk::server {

class Metrics;
class Worker;
struct DeviceState;

struct EngineOptions {
  std::string backend = "auto";   // auto | cuda | cpu
  int workers = 0;                // per device; 0: 2 on the CPU, 4 per GPU
  int cpu_threads = 0;            // per CPU worker; 0: hardware threads / workers
  std::vector<int> cuda_devices;  // ordinals; empty: every visible device
  bool cuda_graphs = true;        // replay captured graphs per plan bucket
  int queue_depth = 64;           // per device
  EngineLimits limits;
  // Tests inject a backend here (fault injection); when set it replaces the
  // --backend choice and serves as the one device.
  std::function<std::unique_ptr<Device>()> device_factory;
};

struct EngineDevice {
  DeviceDescription description;
  int workers = 0;
  bool usable = true;
};

class Engine {
 public:
  // Picks the backend (--backend=auto prefers CUDA when a device is usable)
  // and starts every worker. `metrics` may be null and must outlive the engine.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options,
                                                        Metrics* metrics);
  ~Engine();  // Stop()

  // Hands the job to the device with the shortest queue. Completes the job
  // at once with RESOURCE_EXHAUSTED when every queue is full, UNAVAILABLE
  // when no device is usable or the engine is stopping.
  void Submit(SelectJob* job);

  // Stops taking jobs, lets the workers finish what is queued, joins them.
  void Stop();

  // False after a sticky device error on every device.
  bool usable() const;
  // True when the workers copy request scores into their own staging (GPU):
  // the service then hands them the raw receive buffer instead of a copy.
  bool stages_scores() const { return stages_scores_; }
  const std::string& backend_name() const { return backend_name_; }
  const std::string& backend_reason() const { return backend_reason_; }
  const EngineLimits& limits() const { return options_.limits; }
  const EngineOptions& options() const { return options_; }
  std::vector<EngineDevice> devices() const;
  int64_t queue_depth() const;
  int64_t in_flight() const;

 private:
  struct Slot;
  explicit Engine(EngineOptions options, Metrics* metrics);

  EngineOptions options_;
  Metrics* metrics_;
  std::string backend_name_;
  std::string backend_reason_;
  bool stages_scores_ = false;
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace topk::server
