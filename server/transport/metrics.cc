#include "server/transport/metrics.h"

#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_replace.h"
#include "prometheus/text_serializer.h"

namespace topk::server {
namespace {

// Seconds; 50 us .. 10 s, about three buckets per decade.
prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3,
          50e-3, 100e-3, 250e-3, 500e-3, 1.0,  2.5,    5.0,  10.0};
}

void FillHistogram(const prometheus::Histogram& h, v1::Histogram& out) {
  const prometheus::ClientMetric metric = h.Collect();
  for (const auto& bucket : metric.histogram.bucket) {
    if (bucket.upper_bound != std::numeric_limits<double>::infinity()) {
      out.add_upper_bounds_us(bucket.upper_bound * 1e6);
    }
    out.add_cumulative_counts(bucket.cumulative_count);
  }
  out.set_count(metric.histogram.sample_count);
  out.set_sum_us(metric.histogram.sample_sum * 1e6);
}

}  // namespace

// Refreshes the engine's gauges, then collects the registry.
class Metrics::EngineSampler final : public prometheus::Collectable {
 public:
  EngineSampler(const Engine& engine, std::shared_ptr<prometheus::Registry> registry,
                prometheus::Gauge* queue_depth, prometheus::Gauge* in_flight)
      : engine_(engine),
        registry_(std::move(registry)),
        queue_depth_(queue_depth),
        in_flight_(in_flight) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    queue_depth_->Set(static_cast<double>(engine_.queue_depth()));
    in_flight_->Set(static_cast<double>(engine_.in_flight()));
    std::vector<prometheus::MetricFamily> families = registry_->Collect();
    AppendDeviceFamilies(engine_.devices(), families);
    return families;
  }

 private:
  const Engine& engine_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge* queue_depth_;
  prometheus::Gauge* in_flight_;
};

namespace {

prometheus::ClientMetric Sample(double value, std::vector<prometheus::ClientMetric::Label> labels,
                                prometheus::MetricType type) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return metric;
}

// Requests per backend call, as a Prometheus histogram sample.
prometheus::ClientMetric BatchSample(const BatchSizeCounts& counts,
                                     std::vector<prometheus::ClientMetric::Label> labels) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < counts.buckets.size(); ++i) {
    cumulative += static_cast<uint64_t>(counts.buckets[i]);
    metric.histogram.bucket.push_back(
        {.cumulative_count = cumulative,
         .upper_bound = i < kBatchSizeBounds.size() ? static_cast<double>(kBatchSizeBounds[i])
                                                    : std::numeric_limits<double>::infinity()});
  }
  metric.histogram.sample_count = static_cast<uint64_t>(counts.calls);
  metric.histogram.sample_sum = static_cast<double>(counts.requests);
  return metric;
}

// "cpu" for the host, else the CUDA ordinal.
std::string DeviceLabel(const EngineDevice& device) {
  return device.description.ordinal < 0 ? "cpu" : std::to_string(device.description.ordinal);
}

}  // namespace

// Per-device series, built from one sample of the engine per scrape (their
// label sets follow the devices, so they are not pre-created).
void AppendDeviceFamilies(const std::vector<EngineDevice>& devices,
                          std::vector<prometheus::MetricFamily>& families) {
  using prometheus::MetricType;
  constexpr size_t kDeviceFamilies = 12;
  families.reserve(families.size() + kDeviceFamilies);  // the pointers below stay valid
  auto family = [&](const char* name, const char* help, MetricType type) {
    families.push_back({.name = name, .help = help, .type = type, .metric = {}});
    return &families.back().metric;
  };
  auto* info = family("topk_device_info", "Served devices (value 1): name and UUID by device",
                      MetricType::Gauge);
  auto* usable = family("topk_device_usable", "1 while the device serves, 0 after a sticky error",
                        MetricType::Gauge);
  auto* queued = family("topk_device_queue_depth", "Requests waiting for the device's workers",
                        MetricType::Gauge);
  auto* running =
      family("topk_device_in_flight", "Requests on the device's workers", MetricType::Gauge);
  auto* saturation = family("topk_device_saturation",
                            "Mean busy fraction of the device's workers (0..1) over the last ~10 s "
                            "(exponentially weighted): the autoscaling signal",
                            MetricType::Gauge);
  auto* busy =
      family("topk_device_busy_seconds_total",
             "Worker-seconds the device's workers spent serving batches", MetricType::Counter);
  auto* memory = family("topk_device_memory_used_bytes",
                        "Device memory in use (every process; GPUs only)", MetricType::Gauge);
  auto* total =
      family("topk_device_memory_total_bytes", "Device memory (GPUs only)", MetricType::Gauge);
  auto* plans = family("topk_plan_cache_lookups_total",
                       "Plan-cache lookups by result: hit (plan reused), miss (plan made)",
                       MetricType::Counter);
  auto* captures = family("topk_cuda_graph_captures_total",
                          "CUDA graphs captured (one per plan bucket and worker), by result",
                          MetricType::Counter);
  auto* replays =
      family("topk_cuda_graph_replays_total",
             "Selections served by replaying a captured CUDA graph", MetricType::Counter);
  auto* batches = family("topk_batch_requests",
                         "Requests served per backend call (one launch on a GPU): above 1 when "
                         "concurrent requests were coalesced",
                         MetricType::Histogram);
  for (const EngineDevice& device : devices) {
    const std::string id = DeviceLabel(device);
    batches->push_back(BatchSample(device.batches, {{"device", id}}));
    info->push_back(Sample(
        1, {{"device", id}, {"name", device.description.name}, {"uuid", device.description.uuid}},
        MetricType::Gauge));
    usable->push_back(Sample(device.usable ? 1 : 0, {{"device", id}}, MetricType::Gauge));
    queued->push_back(
        Sample(static_cast<double>(device.queue_depth), {{"device", id}}, MetricType::Gauge));
    running->push_back(
        Sample(static_cast<double>(device.in_flight), {{"device", id}}, MetricType::Gauge));
    saturation->push_back(Sample(device.saturation, {{"device", id}}, MetricType::Gauge));
    busy->push_back(
        Sample(static_cast<double>(device.busy_us) * 1e-6, {{"device", id}}, MetricType::Counter));
    if (device.memory_used_bytes >= 0) {
      memory->push_back(Sample(static_cast<double>(device.memory_used_bytes), {{"device", id}},
                               MetricType::Gauge));
    }
    if (device.description.memory_bytes > 0 && device.description.ordinal >= 0) {
      total->push_back(Sample(static_cast<double>(device.description.memory_bytes),
                              {{"device", id}}, MetricType::Gauge));
    }
    plans->push_back(Sample(static_cast<double>(device.plan_cache_hits),
                            {{"device", id}, {"result", "hit"}}, MetricType::Counter));
    plans->push_back(Sample(static_cast<double>(device.plan_cache_misses),
                            {{"device", id}, {"result", "miss"}}, MetricType::Counter));
    if (device.description.ordinal >= 0) {
      captures->push_back(Sample(static_cast<double>(device.backend.graph_captures),
                                 {{"device", id}, {"result", "ok"}}, MetricType::Counter));
      captures->push_back(Sample(static_cast<double>(device.backend.graph_capture_failures),
                                 {{"device", id}, {"result", "failed"}}, MetricType::Counter));
      replays->push_back(Sample(static_cast<double>(device.backend.graph_replays), {{"device", id}},
                                MetricType::Counter));
    }
  }
  // An empty family would print only its HELP and TYPE lines.
  std::erase_if(families, [](const prometheus::MetricFamily& f) { return f.metric.empty(); });
}

std::string StatusCodeName(absl::StatusCode code) {
  // absl's names are "INVALID_ARGUMENT"-style already, except OK/Cancelled.
  return absl::AsciiStrToUpper(absl::StrReplaceAll(absl::StatusCodeToString(code), {{" ", "_"}}));
}

Metrics::Metrics(const Engine& engine, const std::string& version)
    : engine_(engine), registry_(std::make_shared<prometheus::Registry>()), start_(absl::Now()) {
  prometheus::BuildGauge()
      .Name("topk_build_info")
      .Help("The server's build (value 1): version and serving backend")
      .Register(*registry_)
      .Add({{"version", version}, {"backend", engine.backend_name()}})
      .Set(1);
  auto& requests = prometheus::BuildCounter()
                       .Name("topk_requests_total")
                       .Help("Select and SelectStream calls received")
                       .Register(*registry_);
  requests_ = &requests.Add({});
  rows_ = &prometheus::BuildCounter()
               .Name("topk_rows_total")
               .Help("Rows selected successfully")
               .Register(*registry_)
               .Add({});
  auto& bytes = prometheus::BuildCounter()
                    .Name("topk_bytes_total")
                    .Help("Payload bytes: scores received (in), indices and values sent (out)")
                    .Register(*registry_);
  bytes_in_ = &bytes.Add({{"direction", "in"}});
  bytes_out_ = &bytes.Add({{"direction", "out"}});
  auto& errors = prometheus::BuildCounter()
                     .Name("topk_errors_total")
                     .Help("Failed requests by gRPC status code")
                     .Register(*registry_);
  for (int c = 1; c < kCodes; ++c) {
    errors_[c] = &errors.Add({{"code", StatusCodeName(static_cast<absl::StatusCode>(c))}});
  }
  auto& region_rpc_errors = prometheus::BuildCounter()
                                .Name("topk_region_rpc_errors_total")
                                .Help(
                                    "Refused region RPCs (OpenSession, RegisterRegion, "
                                    "UnregisterRegion, ListRegions) by gRPC status code")
                                .Register(*registry_);
  for (int c = 1; c < kCodes; ++c) {
    region_rpc_errors_[c] =
        &region_rpc_errors.Add({{"code", StatusCodeName(static_cast<absl::StatusCode>(c))}});
  }
  auto& latency = prometheus::BuildHistogram()
                      .Name("topk_latency_seconds")
                      .Help("Per-request latency by stage: queue, device, total (excludes wire)")
                      .Register(*registry_);
  prepare_latency_ = &latency.Add({{"stage", "prepare"}}, LatencyBuckets());
  queue_latency_ = &latency.Add({{"stage", "queue"}}, LatencyBuckets());
  device_latency_ = &latency.Add({{"stage", "device"}}, LatencyBuckets());
  total_latency_ = &latency.Add({{"stage", "total"}}, LatencyBuckets());
  queue_depth_ = &prometheus::BuildGauge()
                      .Name("topk_queue_depth")
                      .Help("Requests waiting for a worker")
                      .Register(*registry_)
                      .Add({});
  in_flight_ = &prometheus::BuildGauge()
                    .Name("topk_in_flight")
                    .Help("Requests being served by workers")
                    .Register(*registry_)
                    .Add({});
  collectable_ = std::make_shared<EngineSampler>(engine_, registry_, queue_depth_, in_flight_);
}

void Metrics::OnRequest() { requests_->Increment(); }

void Metrics::OnBytesIn(int64_t bytes) { bytes_in_->Increment(static_cast<double>(bytes)); }

void Metrics::OnSuccess(int64_t rows, int64_t bytes_out, int64_t prepare_us, int64_t queue_us,
                        int64_t device_us, int64_t total_us) {
  rows_->Increment(static_cast<double>(rows));
  bytes_out_->Increment(static_cast<double>(bytes_out));
  prepare_latency_->Observe(prepare_us * 1e-6);
  queue_latency_->Observe(queue_us * 1e-6);
  device_latency_->Observe(device_us * 1e-6);
  total_latency_->Observe(total_us * 1e-6);
}

void Metrics::OnError(absl::StatusCode code) {
  const int c = static_cast<int>(code);
  if (c > 0 && c < kCodes) errors_[c]->Increment();
}

void Metrics::OnRegionRpcError(absl::StatusCode code) {
  const int c = static_cast<int>(code);
  if (c > 0 && c < kCodes) region_rpc_errors_[c]->Increment();
}

void Metrics::FillStats(v1::Stats& stats) const {
  stats.set_requests(static_cast<uint64_t>(requests_->Value()));
  stats.set_rows(static_cast<uint64_t>(rows_->Value()));
  stats.set_bytes_in(static_cast<uint64_t>(bytes_in_->Value()));
  stats.set_bytes_out(static_cast<uint64_t>(bytes_out_->Value()));
  for (int c = 1; c < kCodes; ++c) {
    const auto n = static_cast<uint64_t>(errors_[c]->Value());
    if (n > 0) (*stats.mutable_errors())[StatusCodeName(static_cast<absl::StatusCode>(c))] = n;
  }
  FillHistogram(*prepare_latency_, *stats.mutable_prepare_latency());
  FillHistogram(*queue_latency_, *stats.mutable_queue_latency());
  FillHistogram(*device_latency_, *stats.mutable_device_latency());
  FillHistogram(*total_latency_, *stats.mutable_total_latency());
  stats.set_queue_depth(engine_.queue_depth());
  stats.set_in_flight(engine_.in_flight());
  stats.set_uptime_s(absl::ToDoubleSeconds(absl::Now() - start_));
  BatchSizeCounts batches;
  for (const EngineDevice& device : engine_.devices()) batches += device.batches;
  v1::BatchSizes& out = *stats.mutable_batch_requests();
  uint64_t cumulative = 0;
  for (size_t i = 0; i < batches.buckets.size(); ++i) {
    if (i < kBatchSizeBounds.size()) out.add_upper_bounds(kBatchSizeBounds[i]);
    cumulative += static_cast<uint64_t>(batches.buckets[i]);
    out.add_cumulative_counts(cumulative);
  }
  out.set_calls(static_cast<uint64_t>(batches.calls));
  out.set_requests(static_cast<uint64_t>(batches.requests));
  out.set_max(static_cast<uint64_t>(batches.max));
}

std::string Metrics::PrometheusText() const {
  return prometheus::TextSerializer().Serialize(collectable_->Collect());
}

}  // namespace topk::server
