// Server metrics on prometheus-cpp: one registry that the metrics port
// (prometheus::Exposer) scrapes and GetStats reads. Every request series is
// created at start, so recording never allocates. The transport records each
// request event here, once; what the engine and the devices know (queue
// depth, in flight, per-device state, device memory, plan-cache and
// CUDA-graph counters) is read from the engine when collected, so the engine
// keeps no metrics of its own.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "server/engine/engine.h"
#include "topk/v1/topk.pb.h"

namespace topk::server {

class Metrics {
 public:
  // `engine` must outlive the metrics. `version` labels topk_build_info.
  Metrics(const Engine& engine, const std::string& version);

  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // What the metrics port scrapes: the registry, with the gauges refreshed.
  std::shared_ptr<prometheus::Collectable> collectable() const { return collectable_; }

  // A Select or SelectStream call arrived (counted before any check, so
  // every error has its request).
  void OnRequest();
  // Score bytes received.
  void OnBytesIn(int64_t bytes);
  void OnSuccess(int64_t rows, int64_t bytes_out, int64_t prepare_us, int64_t queue_us,
                 int64_t device_us, int64_t total_us);
  void OnError(absl::StatusCode code);
  // A region RPC (OpenSession, RegisterRegion, UnregisterRegion,
  // ListRegions) refused, e.g. a body that is not its message.
  void OnRegionRpcError(absl::StatusCode code);

  void FillStats(v1::Stats& stats) const;
  std::string PrometheusText() const;

 private:
  static constexpr int kCodes = 17;  // absl::StatusCode 0..16

  class EngineSampler;

  const Engine& engine_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Collectable> collectable_;
  absl::Time start_;
  prometheus::Counter* requests_;
  prometheus::Counter* rows_;
  prometheus::Counter* bytes_in_;
  prometheus::Counter* bytes_out_;
  std::array<prometheus::Counter*, kCodes> errors_{};
  std::array<prometheus::Counter*, kCodes> region_rpc_errors_{};
  prometheus::Histogram* prepare_latency_;
  prometheus::Histogram* queue_latency_;
  prometheus::Histogram* device_latency_;
  prometheus::Histogram* total_latency_;
  prometheus::Gauge* queue_depth_;
  prometheus::Gauge* in_flight_;
};

// Appends the per-device series (info, usable, queue, in flight, memory,
// plan cache, CUDA graphs) of `devices` to `families`.
void AppendDeviceFamilies(const std::vector<EngineDevice>& devices,
                          std::vector<prometheus::MetricFamily>& families);

// "INVALID_ARGUMENT" etc.: the gRPC spelling of a status code.
std::string StatusCodeName(absl::StatusCode code);

}  // namespace topk::server
