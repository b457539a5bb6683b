#include "server/engine/engine.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/engine/clock.h"
#include "server/engine/worker.h"
#include "spdlog/spdlog.h"

namespace topk::server {

struct Engine::Slot {
  explicit Slot(size_t queue_depth) : state(queue_depth) {}
  std::unique_ptr<Device> device;  // kept for what it reports (memory in use)
  DeviceDescription description;
  DeviceState state;
  std::vector<std::unique_ptr<Worker>> workers;
};

Engine::Engine(const EngineOptions& options) : options_(options) {}

Engine::~Engine() { Stop(); }

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options,
                                                       Backends backends) {
  const RequestLimits& limits = options.limits;
  if (limits.max_k < 1 || limits.max_rows < 1 || limits.max_width < 1 ||
      limits.max_batch_bytes < 4 || options.queue_depth < 1) {
    return absl::InvalidArgumentError(
        "--max_k, --max_rows, --max_width, --max_batch_bytes and --queue_depth must be positive");
  }
  if (options.max_queue_delay_us < 0) {
    return absl::InvalidArgumentError("--max_queue_delay_us must be >= 0");
  }
  if (options.device_probe_ms < 0) {
    return absl::InvalidArgumentError("--device_probe_ms must be >= 0");
  }
  if (backends.devices.empty() || backends.workers_per_device < 1) {
    return absl::InvalidArgumentError("the engine needs at least one device and one worker");
  }
  auto engine = std::unique_ptr<Engine>(new Engine(options));
  engine->backend_name_ = std::move(backends.name);
  engine->backend_reason_ = std::move(backends.reason);
  const WorkerOptions worker_options{.limits = limits,
                                     .max_queue_delay_us = options.max_queue_delay_us};
  Engine* self = engine.get();
  for (std::unique_ptr<Device>& device : backends.devices) {
    auto slot = std::make_unique<Slot>(options.queue_depth);
    slot->description = device->description();
    slot->state.reroute = [self](const QueuedJob& queued) { self->Place(queued); };
    for (int w = 0; w < backends.workers_per_device; ++w) {
      absl::StatusOr<std::unique_ptr<WorkerBackend>> backend = device->CreateWorker(limits);
      if (!backend.ok()) {
        return absl::Status(
            backend.status().code(),
            absl::StrCat(slot->description.name, " worker ", w, ": ", backend.status().message()));
      }
      slot->workers.push_back(
          std::make_unique<Worker>(*std::move(backend), worker_options, &slot->state));
    }
    slot->state.workers = static_cast<int>(slot->workers.size());
    slot->device = std::move(device);
    engine->slots_.push_back(std::move(slot));
  }
  for (auto& slot : engine->slots_) {
    for (auto& worker : slot->workers) worker->Start();
  }
  if (options.device_probe_ms > 0) engine->watch_ = std::thread([self] { self->WatchDevices(); });
  return engine;
}

bool Engine::ProbeDevices() {
  for (auto& slot : slots_) {
    if (!slot->state.usable.load(std::memory_order_acquire)) continue;
    const absl::Status probe = slot->device->Probe();
    if (!probe.ok() && slot->state.usable.exchange(false)) {
      spdlog::critical("{}: marked unusable by its probe: {}", slot->description.name,
                       probe.ToString());
    }
  }
  return usable();
}

void Engine::WatchDevices() {
  const absl::Duration period = absl::Milliseconds(options_.device_probe_ms);
  while (!stop_watch_.WaitForNotificationWithTimeout(period)) {
    if (ProbeDevices()) continue;
    if (options_.on_no_usable_device) options_.on_no_usable_device();
    return;
  }
}

void Engine::Submit(SelectJob* job) { Place(QueuedJob{job, SteadyNowUs()}); }

void Engine::Place(const QueuedJob& queued) {
  SelectJob* job = queued.job;
  // Rows or outputs in a GPU region pin the job to that GPU.
  const int32_t pinned = job->input().device_ordinal;
  // Load: queued and running jobs per worker, compared without division.
  // Equal loads are taken in turn, starting one further each call, so idle
  // devices share a trickle of requests instead of the first taking all.
  const size_t n = slots_.size();
  const size_t start = next_slot_.fetch_add(1, std::memory_order_relaxed);
  Slot* best = nullptr;
  int64_t best_load = 0;
  int64_t best_workers = 1;
  for (size_t i = 0; i < n; ++i) {
    Slot* slot = slots_[(start + i) % n].get();
    if (!slot->state.usable.load(std::memory_order_acquire)) continue;
    if (pinned >= 0 && slot->description.ordinal != pinned) continue;
    const auto load = static_cast<int64_t>(slot->state.queue.size()) +
                      slot->state.in_flight.load(std::memory_order_relaxed);
    const auto workers = static_cast<int64_t>(slot->workers.size());
    if (best == nullptr || load * best_workers < best_load * workers) {
      best = slot;
      best_load = load;
      best_workers = workers;
    }
  }
  if (best == nullptr) {
    job->Complete(
        absl::UnavailableError(
            pinned >= 0 ? absl::StrCat("device ", pinned,
                                       " (where the request's regions are) is not usable: "
                                       "the server hit a device error there")
                        : "no usable device: the server hit a device error"),
        {});
    return;
  }
  if (!best->state.queue.TryPush(queued)) {
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
  if (!stop_watch_.HasBeenNotified()) stop_watch_.Notify();
  if (watch_.joinable()) {
    // From the probe's own callback: it returns right after.
    if (watch_.get_id() == std::this_thread::get_id()) {
      watch_.detach();
    } else {
      watch_.join();
    }
  }
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
    EngineDevice device{.description = slot->description,
                        .workers = static_cast<int>(slot->workers.size()),
                        .usable = slot->state.usable.load(std::memory_order_acquire),
                        .queue_depth = static_cast<int64_t>(slot->state.queue.size()),
                        .in_flight = slot->state.in_flight.load(std::memory_order_relaxed),
                        .memory_used_bytes = slot->device->memory_used_bytes()};
    for (const auto& worker : slot->workers) {
      device.plan_cache_hits += worker->plans().hits();
      device.plan_cache_misses += worker->plans().misses();
      const BackendCounters counters = worker->backend_counters();
      device.backend.graph_captures += counters.graph_captures;
      device.backend.graph_capture_failures += counters.graph_capture_failures;
      device.backend.graph_replays += counters.graph_replays;
    }
    device.batches = slot->state.batches.Sample();
    device.saturation = slot->state.busy.Fraction(SteadyNowUs(), device.workers);
    device.busy_us = slot->state.busy.total_busy_us();
    out.push_back(std::move(device));
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

absl::StatusOr<std::unique_ptr<ChannelExecutor>> Engine::OpenChannel(
    int32_t ordinal, const ChannelSpec& spec) const {
  for (const auto& slot : slots_) {
    if (slot->description.ordinal == ordinal) return slot->device->OpenChannel(spec);
  }
  return absl::NotFoundError(absl::StrCat("device ", ordinal, ": not served by this engine"));
}

bool Engine::mps() const {
  for (const auto& slot : slots_) {
    if (slot->device->mps()) return true;
  }
  return false;
}

}  // namespace topk::server
