#include "server/backends/backend_factory.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/backends/cpu_backend.h"
#include "server/backends/cuda_backend.h"

namespace topk::server {
namespace {

int WorkersOr(int requested, int fallback) { return requested > 0 ? requested : fallback; }

// The ordinals to serve on: every usable one, or the requested ones when all
// of those are usable.
absl::StatusOr<std::vector<int>> ChooseCudaOrdinals(const std::vector<int>& usable,
                                                    const std::vector<int>& requested) {
  if (requested.empty()) return usable;
  for (int d : requested) {
    if (std::find(usable.begin(), usable.end(), d) == usable.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--cuda_devices: device ", d, " is not usable"));
    }
  }
  return requested;
}

// Staging copy threads shared by every GPU worker: a lone large request
// takes all of them (one core copies at a fraction of the link's speed),
// concurrent ones share them.
int CopyThreadsOr(int requested) {
  if (requested >= 0) return requested;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return CopyPool::DefaultThreads(cores);
}

}  // namespace

absl::StatusOr<Backends> CreateBackends(const BackendOptions& options) {
  Backends chosen;
  if (options.device_factory) {
    chosen.devices.push_back(options.device_factory());
    chosen.name = chosen.devices.front()->backend_name();
    chosen.reason = "injected device";
    chosen.workers_per_device = WorkersOr(options.workers, kDefaultCpuWorkers);
    return chosen;
  }
  if (options.backend != "auto" && options.backend != "cuda" && options.backend != "cpu") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend=", options.backend, ": expected auto, cuda or cpu"));
  }
  if (options.backend != "cpu") {
    absl::StatusOr<std::vector<int>> usable = UsableCudaDevices();
    std::vector<int> ordinals;
    if (usable.ok()) {
      absl::StatusOr<std::vector<int>> picked = ChooseCudaOrdinals(*usable, options.cuda_devices);
      if (!picked.ok()) return picked.status();
      ordinals = *std::move(picked);
    }
    if (!ordinals.empty()) {
      const int workers = WorkersOr(options.workers, kDefaultWorkersPerGpu);
      auto copy_pool = std::make_shared<CopyPool>(CopyThreadsOr(options.copy_threads));
      for (int d : ordinals) {
        absl::StatusOr<std::unique_ptr<Device>> device = MakeCudaDevice(
            d, options.cuda_graphs, copy_pool,
            options.staging_streaming_stores ? CopyStores::kStreaming : CopyStores::kCached);
        if (!device.ok()) return device.status();
        chosen.devices.push_back(*std::move(device));
      }
      chosen.name = "cuda";
      chosen.reason = absl::StrCat("--backend=", options.backend, ": CUDA devices ",
                                   absl::StrJoin(ordinals, ","));
      chosen.workers_per_device = workers;
      return chosen;
    }
    const std::string why = usable.ok() ? "no CUDA device" : std::string(usable.status().message());
    if (options.backend == "cuda") {
      return absl::FailedPreconditionError(absl::StrCat("--backend=cuda: ", why));
    }
    chosen.reason =
        absl::StrCat("--backend=auto: no usable CUDA device (", why, "); serving on the CPU");
  } else {
    chosen.reason = "--backend=cpu";
  }
  chosen.name = "cpu";
  chosen.workers_per_device = WorkersOr(options.workers, kDefaultCpuWorkers);
  chosen.devices.push_back(MakeCpuDevice(options.cpu_threads, chosen.workers_per_device));
  return chosen;
}

}  // namespace topk::server
