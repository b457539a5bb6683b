// Contract tests of topk::CpuSelector against the verifier and the reference.
#include "topk/cpu_selector.h"

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "selector_test_util.h"
#include "topk/algorithm_constants.h"

namespace topk::testing {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

std::string Describe(ScoreType t, Distribution d, LengthPattern p, int32_t k,
                     const SelectOptions& o) {
  return absl::StrCat(std::string(ScoreTypeName(t)), " ", std::string(DistributionName(d)),
                      " lengths=", static_cast<int>(p), " k=", k, o.sorted ? " sorted" : "",
                      o.deterministic ? " deterministic" : "");
}

// Score type x K x every distribution x every length pattern, both modes.
// Rows are wide enough (>= kMinSampledWidth) for the sampled path wherever
// the view allows.
class EdgeCaseTest : public ::testing::TestWithParam<std::tuple<ScoreType, int32_t>> {};

TEST_P(EdgeCaseTest, AllDistributionsAndLengthPatterns) {
  const auto [dtype, k] = GetParam();
  CpuSelector selector(CpuSelectorConfig{.threads = 2});
  const int64_t width = std::max<int64_t>(3LL * k + 17, kMinSampledWidth + 3000);
  for (Distribution d : kAllDistributions) {
    for (LengthPattern p : {LengthPattern::kFull, LengthPattern::kCausalTerminal,
                            LengthPattern::kRandom, LengthPattern::kEdges}) {
      GeneratorSpec spec{.distribution = d,
                         .lengths = p,
                         .rows = 6,
                         .width = width,
                         .k = k,
                         .seed = static_cast<uint64_t>(k) * 131 + static_cast<int>(d),
                         .dtype = dtype};
      const ScoreMatrix m = Generate(spec);
      for (SelectOptions o : {SelectOptions{}, SelectOptions{.deterministic = true}}) {
        const Selection got = RunSelector(selector, m.batch(), k, o);
        ASSERT_TRUE(got.status.ok()) << got.status;
        const absl::Status v =
            VerifySelection(m.batch(), k, o, got.indices.data(), got.row_status.data());
        ASSERT_TRUE(v.ok()) << Describe(dtype, d, p, k, o) << ": " << v;
        if (o.deterministic) {
          const Selection want = RunReference(m.batch(), k, o);
          ASSERT_EQ(got.indices, want.indices) << Describe(dtype, d, p, k, o);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TypesAndKs, EdgeCaseTest,
                         ::testing::Combine(::testing::ValuesIn(kAllScoreTypes),
                                            ::testing::Values(1, 2, 7, 64, 512, 2048, 4096, 5000)),
                         [](const ::testing::TestParamInfo<EdgeCaseTest::ParamType>& info) {
                           return absl::StrCat(std::string(ScoreTypeName(std::get<0>(info.param))),
                                               "_k", std::get<1>(info.param));
                         });

TEST(CpuSelectorTest, SortedModeMatchesReference) {
  CpuSelector selector(CpuSelectorConfig{.threads = 2});
  for (Distribution d : {Distribution::kIndexer, Distribution::kFp8Ties, Distribution::kSignedZeros,
                         Distribution::kInfMix}) {
    GeneratorSpec spec{
        .distribution = d, .lengths = LengthPattern::kEdges, .rows = 12, .width = 40000, .k = 300};
    const ScoreMatrix m = Generate(spec);
    for (bool det : {false, true}) {
      const SelectOptions o{.sorted = true, .deterministic = det};
      const Selection got = RunSelector(selector, m.batch(), 300, o);
      ASSERT_TRUE(got.status.ok());
      EXPECT_TRUE(VerifySelection(m.batch(), 300, o, got.indices.data()).ok());
      EXPECT_EQ(got.indices, RunReference(m.batch(), 300, o).indices) << DistributionName(d);
    }
  }
}

TEST(CpuSelectorTest, NanInValidPrefixIsReportedPerRow) {
  const int64_t width = 50000;
  const int32_t k = 100;
  std::vector<float> scores(6 * width);
  for (int64_t r = 0; r < 6; ++r) FillRow(Distribution::kIndexer, 9, r, &scores[r * width], width);
  std::vector<int32_t> lengths = {50000, 50000, 40000, 50, 50000, 20000};
  scores[0 * width + 12345] = kNan;   // long row, sampled path
  scores[1 * width + 37] = kNan;      // on the row's strided view (phase of row 1 is 37)
  scores[2 * width + 45000] = kNan;   // beyond L: padding, ignored
  scores[3 * width + 49] = kNan;      // short row (L <= K), last valid value
  scores[4 * width + 49999] = -kNan;  // negative NaN, last valid value
  RowBatch batch{scores.data(), Layout::kPitched, width, nullptr, lengths.data(), 6, width};
  for (bool sampling : {true, false}) {
    CpuSelector selector(CpuSelectorConfig{.threads = 2, .enable_sampling = sampling});
    const Selection got = RunSelector(selector, batch, k, {});
    ASSERT_TRUE(got.status.ok());
    const std::vector<RowStatus> want = {RowStatus::kNan, RowStatus::kNan, RowStatus::kOk,
                                         RowStatus::kNan, RowStatus::kNan, RowStatus::kOk};
    EXPECT_EQ(got.row_status, want);
    for (int r : {0, 1, 3, 4}) {
      for (int j = 0; j < k; ++j) ASSERT_EQ(got.indices[r * k + j], kEmptySlot) << r;
    }
    EXPECT_TRUE(VerifySelection(batch, k, {}, got.indices.data(), got.row_status.data()).ok());
  }
}

TEST(CpuSelectorTest, RejectsBadShapesAndBatches) {
  CpuSelector selector(CpuSelectorConfig{.threads = 1});
  absl::StatusOr<Plan> bad = selector.MakePlan({0, 4, 100, Layout::kPitched}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("k = 0"), std::string::npos) << bad.status();
  EXPECT_FALSE(selector.MakePlan({4, 0, 100, Layout::kPitched}, {}).ok());
  EXPECT_FALSE(selector.MakePlan({4, 4, 0, Layout::kPitched}, {}).ok());

  absl::StatusOr<Plan> plan = selector.MakePlan({4, 4, 100, Layout::kPitched}, {});
  ASSERT_TRUE(plan.ok());
  std::vector<float> scores(400, 1.0f);
  std::vector<int32_t> lengths = {10, 100, -2, 5};
  std::vector<int32_t> out(16);
  RowBatch batch{scores.data(), Layout::kPitched, 100, nullptr, lengths.data(), 4, 100};
  absl::Status s = selector.Run(*plan, batch, {out.data(), nullptr}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("lengths[2]"), std::string::npos) << s;
  lengths[2] = 101;
  s = selector.Run(*plan, batch, {out.data(), nullptr}, {});
  EXPECT_NE(s.message().find("lengths[2]"), std::string::npos) << s;
  lengths[2] = 3;
  EXPECT_TRUE(selector.Run(*plan, batch, {out.data(), nullptr}, {}).ok());

  Plan k0 = *plan;
  k0.shape.k = 0;
  s = selector.Run(k0, batch, {out.data(), nullptr}, {});
  EXPECT_NE(s.message().find("k = 0"), std::string::npos) << s;
  batch.num_rows = 5;  // more rows than the plan's bucket
  EXPECT_FALSE(selector.Run(*plan, batch, {out.data(), nullptr}, {}).ok());
  batch.num_rows = 4;
  batch.pitch = 50;
  s = selector.Run(*plan, batch, {out.data(), nullptr}, {});
  EXPECT_NE(s.message().find("pitch"), std::string::npos) << s;
  batch.pitch = 100;
  batch.layout = Layout::kPacked;  // differs from the plan
  EXPECT_FALSE(selector.Run(*plan, batch, {out.data(), nullptr}, {}).ok());
  batch.layout = Layout::kPitched;
  EXPECT_FALSE(selector.Run(*plan, batch, {nullptr, nullptr}, {}).ok());
  Plan gpu = *plan;
  gpu.route = Route::kPersistentSampled;
  EXPECT_FALSE(selector.Run(gpu, batch, {out.data(), nullptr}, {}).ok());
}

TEST(CpuSelectorTest, PlanNamesRouteAndWorkspace) {
  CpuSelector sampled(CpuSelectorConfig{.threads = 3});
  absl::StatusOr<Plan> plan = sampled.MakePlan({2048, 64, 1 << 20, Layout::kPitched}, {});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->route, Route::kCpuSampled);
  EXPECT_EQ(plan->sample_stride, kSampleStride);
  EXPECT_EQ(plan->grid, 3);
  EXPECT_GT(plan->workspace_bytes, 0u);
  // Bounded by the width and the thread count, not by the row count.
  absl::StatusOr<Plan> more_rows = sampled.MakePlan({2048, 1 << 20, 1 << 20, Layout::kPitched}, {});
  EXPECT_EQ(more_rows->workspace_bytes, plan->workspace_bytes);
  CpuSelector exact(CpuSelectorConfig{.threads = 1, .enable_sampling = false});
  EXPECT_EQ(exact.MakePlan({8, 1, 100, Layout::kPacked}, {})->route, Route::kCpuExact);
}

TEST(CpuSelectorTest, DeterministicIsBitIdenticalAcrossThreadCountsAndRuns) {
  const int32_t k = 512;
  GeneratorSpec spec{.distribution = Distribution::kBf16Ties,
                     .lengths = LengthPattern::kRandom,
                     .rows = 96,
                     .width = 60000,
                     .k = k,
                     .seed = 77};
  const ScoreMatrix m = Generate(spec);
  const SelectOptions det{.deterministic = true};
  const Selection want = RunReference(m.batch(), k, det);
  for (int threads : {1, 2, 8}) {
    CpuSelector selector(CpuSelectorConfig{.threads = threads});
    for (int run = 0; run < 2; ++run) {
      const Selection got = RunSelector(selector, m.batch(), k, det);
      ASSERT_TRUE(got.status.ok());
      EXPECT_EQ(got.indices, want.indices) << threads << " threads, run " << run;
    }
  }
}

TEST(CpuSelectorTest, PackedLayoutWithUnalignedRowStarts) {
  const int32_t k = 256;
  for (Distribution d :
       {Distribution::kIndexer, Distribution::kStridePeriodic, Distribution::kConstant}) {
    GeneratorSpec spec{.distribution = d,
                       .lengths = LengthPattern::kRandom,
                       .rows = 40,
                       .width = 30000,
                       .k = k,
                       .layout = Layout::kPacked,
                       .padding = kNan};
    ScoreMatrix m = Generate(spec);
    // Shift every row start by one more float so no start is 16-byte aligned.
    std::vector<float> shifted(m.scores.size() + m.rows + 1, kNan);
    for (int64_t r = 0; r < m.rows; ++r) {
      std::copy_n(m.scores.begin() + m.row_offsets[r], m.lengths[r],
                  shifted.begin() + m.row_offsets[r] + r + 1);
      m.row_offsets[r] += r + 1;
    }
    m.scores = std::move(shifted);
    CpuSelector selector(CpuSelectorConfig{.threads = 2});
    const SelectOptions det{.deterministic = true};
    const Selection got = RunSelector(selector, m.batch(), k, det);
    ASSERT_TRUE(got.status.ok());
    EXPECT_TRUE(VerifySelection(m.batch(), k, det, got.indices.data(), got.row_status.data()).ok());
    EXPECT_EQ(got.indices, RunReference(m.batch(), k, det).indices);
  }
}

// The stride-periodic generator fools the proposal: the counters prove the
// band rescue and the exact recovery actually run (and stay exact).
TEST(CpuSelectorTest, RescueAndRecoveryRunOnStridePeriodicRows) {
  const int32_t k = 2048;
  GeneratorSpec spec{.distribution = Distribution::kStridePeriodic,
                     .rows = 64,
                     .width = 65536,
                     .k = k,
                     .padding = kNan};
  const ScoreMatrix m = Generate(spec);
  CpuSelector selector(CpuSelectorConfig{.threads = 2});
  const SelectOptions det{.deterministic = true};
  const Selection got = RunSelector(selector, m.batch(), k, det);
  ASSERT_TRUE(got.status.ok());
  const CpuRouteStats stats = selector.last_run_stats();
  EXPECT_EQ(stats.rows, 64);
  EXPECT_GT(stats.band_rescued, 0);
  EXPECT_GT(stats.exact_recovery, 0);
  EXPECT_EQ(stats.certified + stats.band_rescued + stats.exact_recovery + stats.short_rows, 64);
  EXPECT_TRUE(VerifySelection(m.batch(), k, det, got.indices.data(), got.row_status.data()).ok());
  EXPECT_EQ(got.indices, RunReference(m.batch(), k, det).indices);
}

TEST(CpuSelectorTest, IndexerRowsAreCertifiedWithFewCandidates) {
  const int32_t k = 2048;
  GeneratorSpec spec{.distribution = Distribution::kIndexer, .rows = 16, .width = 200000, .k = k};
  const ScoreMatrix m = Generate(spec);
  CpuSelector selector(CpuSelectorConfig{.threads = 2});
  const Selection got = RunSelector(selector, m.batch(), k, {});
  ASSERT_TRUE(got.status.ok());
  const CpuRouteStats stats = selector.last_run_stats();
  EXPECT_EQ(stats.certified, 16);
  EXPECT_LT(stats.candidates, 16 * 4 * k);  // q0 = 1.5 K / s keeps the volume near K
  EXPECT_TRUE(VerifySelection(m.batch(), k, {}, got.indices.data(), got.row_status.data()).ok());
}

TEST(CpuSelectorTest, ExactRouteWithSamplingOff) {
  const int32_t k = 1000;
  CpuSelector selector(CpuSelectorConfig{.threads = 2, .enable_sampling = false});
  for (Distribution d : kAllDistributions) {
    GeneratorSpec spec{.distribution = d,
                       .lengths = LengthPattern::kCausalTerminal,
                       .rows = 8,
                       .width = 70000,
                       .k = k};
    const ScoreMatrix m = Generate(spec);
    const SelectOptions det{.deterministic = true};
    const Selection got = RunSelector(selector, m.batch(), k, det);
    ASSERT_TRUE(got.status.ok());
    const CpuRouteStats stats = selector.last_run_stats();
    EXPECT_EQ(stats.exact_recovery, 8);
    EXPECT_EQ(stats.certified + stats.band_rescued, 0);
    EXPECT_TRUE(VerifySelection(m.batch(), k, det, got.indices.data()).ok()) << DistributionName(d);
    EXPECT_EQ(got.indices, RunReference(m.batch(), k, det).indices) << DistributionName(d);
  }
}

TEST(CpuSelectorTest, EmptyBatchAndZeroLengthRows) {
  CpuSelector selector(CpuSelectorConfig{.threads = 2});
  std::vector<int32_t> lengths = {0, 0};
  std::vector<float> scores(8, 1.0f);
  RowBatch batch{scores.data(), Layout::kPitched, 4, nullptr, lengths.data(), 2, 4};
  const Selection got = RunSelector(selector, batch, 3, {});
  ASSERT_TRUE(got.status.ok());
  EXPECT_EQ(got.indices, std::vector<int32_t>(6, kEmptySlot));
  batch.num_rows = 0;
  EXPECT_TRUE(RunSelector(selector, batch, 3, {}).status.ok());
}

}  // namespace
}  // namespace topk::testing
