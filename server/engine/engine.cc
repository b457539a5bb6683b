#include "server/engine/engine.h"

#include <algorithm>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/engine/cpu_backend.h"
#include "server/engine/cuda_backend.h"
#include "server/engine/worker.h"
#include "server/metrics.h"
#include "spdlog/spdlog.h"

namespace topk::server {

struct Engine::Slot {
  explicit Slot(size_t queue_depth) : state(queue_depth) {}
  DeviceDescription description;
  DeviceState state;
  std::vector<std::unique_ptr<Worker>> workers;
};

namespace {

struct ChosenDevices {
  std::vector<std::unique_ptr<Device>> devices;
  std::string reason;
};

absl::StatusOr<ChosenDevices> ChooseDevices(const EngineOptions& options) {
  ChosenDevices chosen;
  if (options.device_factory) {
    chosen.devices.push_back(options.device_factory());
    chosen.reason = "injected device";
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
      if (options.cuda_devices.empty()) {
        ordinals = *usable;
      } else {
        for (int d : options.cuda_devices) {
          if (std::find(usable->begin(), usable->end(), d) == usable->end()) {
            return absl::InvalidArgumentError(
                absl::StrCat("--cuda_devices: device ", d, " is not usable"));
          }
          ordinals.push_back(d);
        }
      }
    }
    if (!ordinals.empty()) {
      for (int d : ordinals) {
        absl::StatusOr<std::unique_ptr<Device>> device = MakeCudaDevice(d, options.cuda_graphs);
        if (!device.ok()) return device.status();
        chosen.devices.push_back(*std::move(device));
      }
      chosen.reason = absl::StrCat("--backend=", options.backend, ": CUDA devices ",
                                   absl::StrJoin(ordinals, ","));
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
  const int workers = options.workers > 0 ? options.workers : 2;
  chosen.devices.push_back(MakeCpuDevice(options.cpu_threads, workers));
  return chosen;
}

}  // namespace

Engine::Engine(EngineOptions options, Metrics* metrics)
    : options_(std::move(options)), metrics_(metrics) {}

Engine::~Engine() { Stop(); }

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options,
                                                       Metrics* metrics) {
  const EngineLimits& limits = options.limits;
  if (limits.max_k < 1 || limits.max_rows < 1 || limits.max_width < 1 ||
      limits.max_batch_bytes < 4 || options.queue_depth < 1) {
    return absl::InvalidArgumentError(
        "--max_k, --max_rows, --max_width, --max_batch_bytes and --queue_depth must be positive");
  }
  absl::StatusOr<ChosenDevices> chosen = ChooseDevices(options);
  if (!chosen.ok()) return chosen.status();

  auto engine = absl::WrapUnique(new Engine(options, metrics));
  engine->backend_name_ = chosen->devices.front()->backend_name();
  engine->backend_reason_ = chosen->reason;
  const int workers =
      options.workers > 0 ? options.workers : (engine->backend_name_ == "cpu" ? 2 : 4);
  for (std::unique_ptr<Device>& device : chosen->devices) {
    auto slot = std::make_unique<Slot>(options.queue_depth);
    slot->description = device->description();
    for (int w = 0; w < workers; ++w) {
      absl::StatusOr<std::unique_ptr<WorkerBackend>> backend = device->CreateWorker(limits);
      if (!backend.ok()) {
        return absl::Status(
            backend.status().code(),
            absl::StrCat(slot->description.name, " worker ", w, ": ", backend.status().message()));
      }
      engine->stages_scores_ = (*backend)->stages_scores();
      slot->workers.push_back(
          std::make_unique<Worker>(*std::move(backend), limits, &slot->state, metrics));
    }
    engine->slots_.push_back(std::move(slot));
  }
  for (auto& slot : engine->slots_) {
    for (auto& worker : slot->workers) worker->Start();
  }
  return engine;
}

void Engine::Submit(SelectJob* job) {
  Slot* best = nullptr;
  size_t best_size = 0;
  for (auto& slot : slots_) {
    if (!slot->state.usable.load(std::memory_order_acquire)) continue;
    const size_t size = slot->state.queue.size();
    if (best == nullptr || size < best_size) {
      best = slot.get();
      best_size = size;
    }
  }
  if (best == nullptr) {
    job->Complete(absl::UnavailableError("no usable device: the server hit a device error"), {});
    return;
  }
  if (metrics_ != nullptr) metrics_->AddQueueDepth(1);
  if (!best->state.queue.TryPush(QueuedJob{job, SteadyNowUs()})) {
    if (metrics_ != nullptr) metrics_->AddQueueDepth(-1);
    if (best->state.queue.closed()) {
      job->Complete(absl::UnavailableError("the server is shutting down"), {});
      return;
    }
    job->Complete(absl::ResourceExhaustedError(
                      absl::StrCat("the request queue is full (", best->state.queue.capacity(),
                                   " requests waiting); retry later or raise --queue_depth")),
                  {});
  }
}

void Engine::Stop() {
  for (auto& slot : slots_) slot->state.queue.Close();
  for (auto& slot : slots_) {
    for (auto& worker : slot->workers) worker->Join();
  }
}

bool Engine::usable() const {
  for (const auto& slot : slots_) {
    if (slot->state.usable.load(std::memory_order_acquire)) return true;
  }
  return false;
}

std::vector<EngineDevice> Engine::devices() const {
  std::vector<EngineDevice> out;
  for (const auto& slot : slots_) {
    out.push_back({.description = slot->description,
                   .workers = static_cast<int>(slot->workers.size()),
                   .usable = slot->state.usable.load(std::memory_order_acquire)});
  }
  return out;
}

int64_t Engine::queue_depth() const {
  int64_t total = 0;
  for (const auto& slot : slots_) total += static_cast<int64_t>(slot->state.queue.size());
  return total;
}

int64_t Engine::in_flight() const {
  int64_t total = 0;
  for (const auto& slot : slots_) total += slot->state.in_flight.load(std::memory_order_relaxed);
  return total;
}

}  // namespace topk::server
