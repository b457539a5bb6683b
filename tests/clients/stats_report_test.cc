// topk-cli stats' percentiles: interpolated within the cumulative buckets the
// server reports, and both output forms carry them.
#include "stats_report.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace topk::tools {
namespace {

v1::Histogram Histogram() {
  // 10 samples in (0, 100], 20 in (100, 200], 10 in (200, 400], none above.
  v1::Histogram h;
  for (double bound : {100.0, 200.0, 400.0}) h.add_upper_bounds_us(bound);
  for (uint64_t cumulative : {10u, 30u, 40u, 40u}) h.add_cumulative_counts(cumulative);
  h.set_count(40);
  h.set_sum_us(6000);
  return h;
}

TEST(StatsReport, QuantilesInterpolateWithinTheirBucket) {
  const v1::Histogram h = Histogram();
  EXPECT_DOUBLE_EQ(HistogramQuantileUs(h, 0.5), 150.0);   // rank 20: half-way through (100, 200]
  EXPECT_DOUBLE_EQ(HistogramQuantileUs(h, 0.9), 320.0);   // rank 36: 6 of 10 into (200, 400]
  EXPECT_DOUBLE_EQ(HistogramQuantileUs(h, 0.99), 392.0);  // rank 39.6
  EXPECT_DOUBLE_EQ(HistogramQuantileUs(h, 0.1), 40.0);    // rank 4 of the 10 in (0, 100]
  EXPECT_DOUBLE_EQ(HistogramQuantileUs(v1::Histogram(), 0.5), 0.0);
}

TEST(StatsReport, AboveTheLastBoundIsTheLastBound) {
  v1::Histogram h = Histogram();
  h.set_cumulative_counts(3, 50);  // 10 samples beyond 400 us
  h.set_count(50);
  EXPECT_DOUBLE_EQ(HistogramQuantileUs(h, 0.99), 400.0);
}

TEST(StatsReport, TextAndJsonCarryCountersErrorsAndPercentiles) {
  v1::Stats stats;
  stats.set_requests(42);
  stats.set_rows(100);
  (*stats.mutable_errors())["INVALID_ARGUMENT"] = 2;
  *stats.mutable_total_latency() = Histogram();
  const std::string text = StatsText(stats);
  EXPECT_TRUE(absl::StrContains(text, "requests: 42")) << text;
  EXPECT_TRUE(absl::StrContains(text, "INVALID_ARGUMENT=2")) << text;
  EXPECT_TRUE(absl::StrContains(text, "150.0")) << text;  // total p50
  const std::string json = StatsJson(stats);
  EXPECT_TRUE(absl::StrContains(json, "\"requests\": 42")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"INVALID_ARGUMENT\": 2")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"p99_us\": 392.000")) << json;
}

}  // namespace
}  // namespace topk::tools
