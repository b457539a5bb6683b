// GPU tests of the KV-split route with the band kept apart in the segment CTAs
// (CudaSelectorConfig::kv_split_band): stride-periodic rows under the
// one-float view, whose certified sets underfill K on many rows, finished from
// certified + band (or, where the band underfills too, on one CTA), exact in
// every mode; a small case for the sanitizers. (kv_split_band is the default:
// CudaSelectorTest's KV-split tests, graph replays included, run it too.)
// Every test asserts the route in the plan. Skips without a device.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "selector_fixture.h"

namespace topk::cuda_test {
namespace {

class KvSplitBandTest : public CudaSelectorTest {
 protected:
  std::unique_ptr<CudaSelector> MakeBand(CudaSelectorConfig c = KvSplitConfig()) {
    c.kv_split_band = true;
    auto s = CudaSelector::Create(c);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
};

// 64 stride-periodic rows (every mode): on the cluster route, which takes the
// same tau0 / tau1 from the same view, 7 of such 64 rows certified, 18 needed
// the band and 39 the exact fallback, so both the band and the one-CTA path run.
TEST_P(KvSplitBandTest, StridePeriodicRowsUnderTheOneFloatView) {
  CudaSelectorConfig c = KvSplitConfig();
  c.sample_run = 1;
  c.sample_stride = 64;  // the view the stride-periodic rows are built against
  auto sel = MakeBand(c);
  ASSERT_NE(sel, nullptr);
  GeneratorSpec spec;
  spec.distribution = Distribution::kStridePeriodic;
  spec.rows = 64;
  spec.width = 131072;
  spec.sample_stride = 64;
  const ScoreMatrix m = Gen(spec);
  for (int mode = 0; mode < 4; ++mode) {
    SelectOptions o;
    o.sorted = mode & 1;
    o.deterministic = mode & 2;
    Plan plan;
    Check(*sel, m, 2048, o, "stride-periodic mode " + std::to_string(mode), &plan);
    if (HasFatalFailure()) return;
    ASSERT_EQ(plan.route, Route::kKvSplitSampled);
    std::printf("mode %d: certified %lld band %lld exact %lld\n", mode,
                static_cast<long long>(last_stats_.certified),
                static_cast<long long>(last_stats_.band_rescued),
                static_cast<long long>(last_stats_.exact_recovery));
    EXPECT_GT(last_stats_.band_rescued, 0) << "the band path did not run";
  }
}

// Small enough for the sanitizers: stride-periodic rows under the one-float
// view (certified, band and one-CTA rows) and a constant row (its admitted set
// exceeds the row buffer: the re-scans).
TEST_P(KvSplitBandTest, SanitizerSmall) {
  CudaSelectorConfig c = KvSplitConfig();
  c.sample_run = 1;
  c.sample_stride = 64;  // the view the stride-periodic rows are built against
  auto sel = MakeBand(c);
  ASSERT_NE(sel, nullptr);
  GeneratorSpec spec;
  spec.distribution = Distribution::kStridePeriodic;
  spec.rows = 8;
  spec.width = 65536;
  spec.sample_stride = 64;
  ScoreMatrix m = testing::Generate(spec);
  for (int64_t i = 0; i < spec.width; ++i) m.scores[7 * spec.width + i] = 0.25f;
  m = Typed(std::move(m));
  for (int mode : {0, 3}) {
    SelectOptions o;
    o.sorted = mode & 1;
    o.deterministic = mode & 2;
    Plan plan;
    Check(*sel, m, 2048, o, "small mode " + std::to_string(mode), &plan);
    if (HasFatalFailure()) return;
    ASSERT_EQ(plan.route, Route::kKvSplitSampled);
  }
}

// One kernel (512 threads), every score type.
INSTANTIATE_TEST_SUITE_P(ScoreTypes, KvSplitBandTest,
                         ::testing::Combine(::testing::Values(2),
                                            ::testing::ValuesIn(kAllScoreTypes)),
                         [](const ::testing::TestParamInfo<SelectorParam>& info) {
                           return std::string(ScoreTypeName(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace topk::cuda_test
