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
    return registry_->Collect();
  }

 private:
  const Engine& engine_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge* queue_depth_;
  prometheus::Gauge* in_flight_;
};

std::string StatusCodeName(absl::StatusCode code) {
  // absl's names are "INVALID_ARGUMENT"-style already, except OK/Cancelled.
  return absl::AsciiStrToUpper(absl::StrReplaceAll(absl::StatusCodeToString(code), {{" ", "_"}}));
}

Metrics::Metrics(const Engine& engine)
    : engine_(engine), registry_(std::make_shared<prometheus::Registry>()), start_(absl::Now()) {
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
  auto& latency = prometheus::BuildHistogram()
                      .Name("topk_latency_seconds")
                      .Help("Per-request latency by stage: queue, device, total (excludes wire)")
                      .Register(*registry_);
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

void Metrics::OnSuccess(int64_t rows, int64_t bytes_out, int64_t queue_us, int64_t device_us,
                        int64_t total_us) {
  rows_->Increment(static_cast<double>(rows));
  bytes_out_->Increment(static_cast<double>(bytes_out));
  queue_latency_->Observe(queue_us * 1e-6);
  device_latency_->Observe(device_us * 1e-6);
  total_latency_->Observe(total_us * 1e-6);
}

void Metrics::OnError(absl::StatusCode code) {
  const int c = static_cast<int>(code);
  if (c > 0 && c < kCodes) errors_[c]->Increment();
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
  FillHistogram(*queue_latency_, *stats.mutable_queue_latency());
  FillHistogram(*device_latency_, *stats.mutable_device_latency());
  FillHistogram(*total_latency_, *stats.mutable_total_latency());
  stats.set_queue_depth(engine_.queue_depth());
  stats.set_in_flight(engine_.in_flight());
  stats.set_uptime_s(absl::ToDoubleSeconds(absl::Now() - start_));
}

std::string Metrics::PrometheusText() const {
  return prometheus::TextSerializer().Serialize(collectable_->Collect());
}

}  // namespace topk::server
