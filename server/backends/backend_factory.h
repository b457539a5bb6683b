// Chooses and creates the devices the server runs on. The composition root
// (server/server.cc) calls it and hands the result to the engine, which never
// constructs a backend itself.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backends/backend.h"

namespace topk::server {

inline constexpr int kDefaultCpuWorkers = 2;
inline constexpr int kDefaultWorkersPerGpu = 4;

struct BackendOptions {
  std::string backend = "auto";   // auto | cuda | cpu
  std::vector<int> cuda_devices;  // ordinals; empty: every usable device
  bool cuda_graphs = true;        // replay captured graphs per plan bucket
  int workers = 0;                // per device; 0: kDefaultCpuWorkers or kDefaultWorkersPerGpu
  int cpu_threads = 0;            // per CPU worker; 0: hardware threads / workers
  // Staging copy threads shared by the GPU workers; -1: half the cores, at
  // most 16 (CopyPool::DefaultThreads).
  int copy_threads = -1;
  // The staging copy writes pinned memory with streaming (non-temporal)
  // stores: the DMA engine reads it next, so caching it gains nothing.
  bool staging_streaming_stores = true;
  // Tests inject a device here (fault injection); when set it replaces the
  // `backend` choice and is the one device.
  std::function<std::unique_ptr<Device>()> device_factory;
};

// What the factory chose: every device of one backend, and how many workers
// each gets.
struct Backends {
  std::string name;    // "cuda", "cpu", or an injected device's backend_name()
  std::string reason;  // why: logged at start and reported by GetServerInfo
  int workers_per_device = 0;
  std::vector<std::unique_ptr<Device>> devices;  // at least one
};

// --backend=auto prefers CUDA when a device is usable and falls back to the
// CPU; cuda fails without a usable device.
absl::StatusOr<Backends> CreateBackends(const BackendOptions& options);

}  // namespace topk::server
