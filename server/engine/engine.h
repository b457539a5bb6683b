// The engine: per device a bounded request queue and a pool of persistent
// workers, over devices the composition root chose (server/backends/
// backend_factory.h). Everything is allocated by Create; Submit never
// allocates.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "server/backends/backend.h"
#include "server/backends/backend_factory.h"
#include "server/engine/batch_sizes.h"
#include "server/engine/select_job.h"
#include "server/engine/worker.h"

namespace topk::server {

struct EngineOptions {
  int queue_depth = 64;  // per device
  // Coalescing: a worker that takes a job also takes compatible queued jobs
  // (coalescing.h) until the first job has waited this long since Submit
  // (or the batch is full), and serves them in one backend call. 0: every
  // job is its own call.
  int64_t max_queue_delay_us = 100;
  RequestLimits limits;
  // Every this many ms a thread probes each usable device (Device::Probe)
  // and marks one whose context is lost unusable, so an idle server notices
  // a lost GPU (e.g. another MPS client's fatal fault) before a client does.
  // 0: no probing (devices turn unusable only when a call fails).
  int64_t device_probe_ms = 500;
  // Called once, from the probe's thread, when no usable device is left.
  std::function<void()> on_no_usable_device;
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
  BatchSizeCounts batches;  // requests per backend call
  // The workers' mean busy fraction over the last ~10 s (BusyWindow), and
  // their busy time in all.
  double saturation = 0;
  int64_t busy_us = 0;
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

  // Hands the job to the least loaded usable device (queued and running
  // jobs per worker; ties taken in turn), or to the device its regions are
  // on. Completes the job at once with RESOURCE_EXHAUSTED when that queue is
  // full, UNAVAILABLE when no device can serve it or the engine is stopping.
  void Submit(SelectJob* job);

  // Stops taking jobs, lets the workers finish what is queued, joins them
  // and the device probe.
  void Stop();

  // Probes every usable device once (Device::Probe) and marks those whose
  // probe fails unusable; returns usable(). The probe thread's step, public
  // for tests.
  bool ProbeDevices();

  // False after a sticky device error on every device.
  bool usable() const;
  const std::string& backend_name() const { return backend_name_; }
  const std::string& backend_reason() const { return backend_reason_; }
  // True when the backend reads host rows (a client's shared memory) where
  // they are, when they are aligned floats: the CPU selector does; a GPU
  // backend stages every host row into pinned memory, within
  // max_batch_bytes. (Rows in GPU memory are read in place on their device.)
  bool reads_host_rows_in_place() const { return backend_name_ == "cpu"; }
  const EngineOptions& options() const { return options_; }
  const RequestLimits& limits() const { return options_.limits; }
  std::vector<EngineDevice> devices() const;
  // Jobs waiting in the queues, and jobs on workers, right now.
  int64_t queue_depth() const;
  int64_t in_flight() const;

  // A channel executor on the device of CUDA ordinal `ordinal` (-1: the
  // host CPU): NOT_FOUND when the engine serves no such device,
  // UNIMPLEMENTED when its backend serves no channels.
  absl::StatusOr<std::unique_ptr<ChannelExecutor>> OpenChannel(int32_t ordinal,
                                                               const ChannelSpec& spec) const;
  // Whether any device's contexts are MPS clients.
  bool mps() const;

 private:
  struct Slot;
  explicit Engine(const EngineOptions& options);

  // Queues `queued` on a usable device that may serve it (a job from a
  // device that turned unusable keeps its place in time), or completes it.
  void Place(const QueuedJob& queued);
  void WatchDevices();

  EngineOptions options_;
  std::string backend_name_;
  std::string backend_reason_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::atomic<size_t> next_slot_{0};  // where ties start, in turn
  absl::Notification stop_watch_;
  std::thread watch_;  // last: joined before the slots go
};

}  // namespace topk::server
