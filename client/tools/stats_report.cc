#include "stats_report.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace topk::tools {
namespace {

constexpr std::pair<const char*, double> kQuantiles[] = {
    {"p50", 0.50}, {"p90", 0.90}, {"p99", 0.99}, {"p999", 0.999}};

struct Stage {
  const char* name;
  const v1::Histogram* histogram;
};

std::vector<Stage> Stages(const v1::Stats& stats) {
  return {{"prepare", &stats.prepare_latency()},
          {"queue", &stats.queue_latency()},
          {"device", &stats.device_latency()},
          {"total", &stats.total_latency()}};
}

double MeanUs(const v1::Histogram& h) { return h.count() > 0 ? h.sum_us() / h.count() : 0; }

// Errors sorted by code name, so the output is stable.
std::map<std::string, uint64_t> Errors(const v1::Stats& stats) {
  return {stats.errors().begin(), stats.errors().end()};
}

}  // namespace

double HistogramQuantileUs(const v1::Histogram& h, double q) {
  if (h.count() == 0 || h.cumulative_counts_size() == 0) return 0;
  const double rank = q * static_cast<double>(h.count());
  double lower_bound = 0;
  uint64_t below = 0;
  for (int b = 0; b < h.cumulative_counts_size(); ++b) {
    const uint64_t cumulative = h.cumulative_counts(b);
    if (b >= h.upper_bounds_us_size()) {
      // The +Inf bucket: nothing to interpolate against.
      return h.upper_bounds_us_size() > 0 ? h.upper_bounds_us(h.upper_bounds_us_size() - 1) : 0;
    }
    const double upper = h.upper_bounds_us(b);
    if (static_cast<double>(cumulative) >= rank) {
      const uint64_t in_bucket = cumulative - below;
      if (in_bucket == 0) return upper;
      return lower_bound + (upper - lower_bound) * (rank - static_cast<double>(below)) / in_bucket;
    }
    below = cumulative;
    lower_bound = upper;
  }
  return lower_bound;
}

std::string StatsText(const v1::Stats& stats) {
  std::string out = absl::StrFormat(
      "requests: %d   rows: %d   in: %.3f MB   out: %.3f MB   uptime: %.1f s\n"
      "queue depth: %d   in flight: %d\n",
      stats.requests(), stats.rows(), stats.bytes_in() / 1e6, stats.bytes_out() / 1e6,
      stats.uptime_s(), stats.queue_depth(), stats.in_flight());
  const std::map<std::string, uint64_t> errors = Errors(stats);
  absl::StrAppend(&out, "errors:", errors.empty() ? " none" : "");
  for (const auto& [code, count] : errors) absl::StrAppend(&out, " ", code, "=", count);
  absl::StrAppendFormat(&out, "\n\n%-7s %10s %10s", "stage", "count", "mean_us");
  for (const auto& [name, q] : kQuantiles) absl::StrAppendFormat(&out, " %10s", name);
  out += "\n";
  for (const Stage& stage : Stages(stats)) {
    absl::StrAppendFormat(&out, "%-7s %10d %10.1f", stage.name, stage.histogram->count(),
                          MeanUs(*stage.histogram));
    for (const auto& [name, q] : kQuantiles) {
      absl::StrAppendFormat(&out, " %10.1f", HistogramQuantileUs(*stage.histogram, q));
    }
    out += "\n";
  }
  out += "(percentiles estimated within the latency buckets, 50 us .. 10 s)\n";
  return out;
}

std::string StatsJson(const v1::Stats& stats) {
  std::vector<std::string> errors;
  for (const auto& [code, count] : Errors(stats)) {
    errors.push_back(absl::StrFormat("\"%s\": %d", code, count));
  }
  std::vector<std::string> stages;
  for (const Stage& stage : Stages(stats)) {
    std::string s = absl::StrFormat("\"%s\": {\"count\": %d, \"mean_us\": %.3f", stage.name,
                                    stage.histogram->count(), MeanUs(*stage.histogram));
    for (const auto& [name, q] : kQuantiles) {
      absl::StrAppendFormat(&s, ", \"%s_us\": %.3f", name,
                            HistogramQuantileUs(*stage.histogram, q));
    }
    stages.push_back(s + "}");
  }
  return absl::StrFormat(
      "{\"requests\": %d, \"rows\": %d, \"bytes_in\": %d, \"bytes_out\": %d, \"uptime_s\": %.3f, "
      "\"queue_depth\": %d, \"in_flight\": %d, \"errors\": {%s}, \"latency\": {%s}}\n",
      stats.requests(), stats.rows(), stats.bytes_in(), stats.bytes_out(), stats.uptime_s(),
      stats.queue_depth(), stats.in_flight(), absl::StrJoin(errors, ", "),
      absl::StrJoin(stages, ", "));
}

}  // namespace topk::tools
