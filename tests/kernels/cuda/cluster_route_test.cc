// GPU tests of the cluster route (Route::kClusterSampled: one thread-block
// cluster of 8 or 16 CTAs per row, histograms and counts all-reduced through
// distributed shared memory, rank 0 refines): every generator, K, layout and
// mode with ragged lengths (0, 1, K-1, K, K+1, width); K-th boundaries inside
// one coarse bin (gathered and re-scanned frontiers); infinity floods, NaN
// and bad lengths; the band rescue and exact fallback on stride-periodic rows;
// clusters taking several rows in turn; graph replays; small cases for the
// sanitizers (one row per path, and one row that takes the band). Every test
// asserts the route in the plan and the rows the clusters served (kernel
// counters). Both cluster sizes and both kernel variants (1 or 2 CTAs per
// SM) on FP32, BF16 and FP16 rows; skips without a device or without
// clusters of the variant.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "route_policies.h"
#include "route_test_rows.h"
#include "selector_fixture.h"
#include "topk/algorithm_constants.h"
#include "topk/keys.h"

namespace topk::cuda_test {
namespace {

// The parameter's first element is the cluster kernel variant here: CTAs per
// cluster x 10 + CTAs per SM (81, 82, 161, 162).
class ClusterRouteTest : public CudaSelectorTest {
 protected:
  int Ranks() const { return std::get<0>(GetParam()) / 10; }
  int PerSm() const { return std::get<0>(GetParam()) % 10; }
  int64_t Clusters(const CudaDeviceInfo& d) const {
    if (PerSm() == 2) return Ranks() == 16 ? d.dense_clusters_of_16 : d.dense_clusters_of_8;
    return Ranks() == 16 ? d.clusters_of_16 : d.clusters_of_8;
  }

  std::unique_ptr<CudaSelector> MakeCluster(CudaSelectorConfig c = {}) {
    c.cluster_route = 1;
    c.cluster_size = Ranks();
    c.cluster_ctas_per_sm = PerSm();
    auto s = CudaSelector::Create(c);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok() || Clusters((*s)->device_info()) <= 0) return nullptr;
    return std::move(*s);
  }

  // Runs m on the cluster route; every row against the verifier and the
  // reference (bit-identical where the answer is unique: L <= K or
  // deterministic); the route in the plan; the rows the clusters served
  // (L > K, L >= the sampled length, no NaN) in the kernel's counters.
  void CheckRoute(CudaSelector& sel, const ScoreMatrix& m, int32_t k, const SelectOptions& o,
                  const std::string& what) {
    std::vector<int32_t> out;
    std::vector<RowStatus> status;
    Plan plan;
    RunOn(sel, m, k, o, &out, &status, &plan);
    if (HasFatalFailure()) return;
    ASSERT_EQ(plan.route, Route::kClusterSampled) << what;
    ASSERT_EQ(plan.split, Ranks()) << what;
    ASSERT_EQ(plan.ctas_per_sm, PerSm()) << what;
    ExpectReferenceAnswer(m, k, o, out, status, what);
    if (HasFatalFailure()) return;
    int64_t served = 0;
    for (int64_t r = 0; r < m.rows; ++r) {
      served += status[r] == RowStatus::kOk && m.lengths[r] > k &&
                        m.lengths[r] >= topk::planner::kMinSampledLength
                    ? 1
                    : 0;
    }
    ASSERT_EQ(last_stats_.cluster_rows, served) << what;
  }
};

#define MAKE_CLUSTER_OR_SKIP(sel, ...) \
  auto sel = MakeCluster(__VA_ARGS__); \
  if (HasFailure()) return;            \
  if (sel == nullptr) GTEST_SKIP() << "no clusters of " << Ranks() << " CTAs x " << PerSm()

// Rows of 70001 (segments end off the 16-byte grid) with the edge lengths
// {0, 1, K-1, K, K+1, width} and full rows.
TEST_P(ClusterRouteTest, EveryGeneratorEveryKBothLayoutsAllModes) {
  MAKE_CLUSTER_OR_SKIP(sel);
  ForEachEdgeLengthCase(300, [&](const GeneratorSpec& spec, int32_t k, const SelectOptions& o,
                                 const std::string& what) {
    CheckRoute(*sel, Gen(spec), k, o, what);
    return !HasFatalFailure();
  });
}

// BoundaryInOneBinRows: in_bin 5000: the frontier is gathered into rank 0;
// 30000: it exceeds rank 0's store and refinement re-scans the row.
TEST_P(ClusterRouteTest, BoundaryInsideOneCoarseBin) {
  MAKE_CLUSTER_OR_SKIP(sel);
  for (int in_bin : {5000, 30000}) {
    const ScoreMatrix m = Typed(BoundaryInOneBinRows(in_bin, 131072));
    for (int mode = 0; mode < 4; ++mode) {
      SelectOptions o;
      o.sorted = mode & 1;
      o.deterministic = mode & 2;
      for (int32_t k : {1000, 2048, 4096}) {
        CheckRoute(*sel, m, k, o,
                   "bin of " + std::to_string(in_bin) + " k=" + std::to_string(k) + " mode " +
                       std::to_string(mode));
        if (HasFatalFailure()) return;
      }
    }
  }
}

// +inf and -inf floods (the K-th value +inf, -inf, or finite between them),
// an all -inf row, NaN in one rank's segment, NaN in an L <= K row, a NaN
// just beyond L (ignored); then the same rows with two bad lengths (their
// status and empty rows; the verifier takes valid lengths only).
TEST_P(ClusterRouteTest, InfinityFloodsNanAndBadLengths) {
  MAKE_CLUSTER_OR_SKIP(sel);
  ScoreMatrix m = FloodAndNanRows(100000, 11);
  m = Typed(std::move(m));
  for (int mode = 0; mode < 4; ++mode) {
    SelectOptions o;
    o.sorted = mode & 1;
    o.deterministic = mode & 2;
    CheckRoute(*sel, m, 2048, o, "floods mode " + std::to_string(mode));
    if (HasFatalFailure()) return;
  }
  SetBadLengths(m);
  std::vector<int32_t> out;
  std::vector<RowStatus> status;
  RunOn(*sel, m, 2048, {}, &out, &status);
  ExpectEachRow(m, 2048, kFloodAndNanStatuses, out, status);
  if (HasFatalFailure()) return;
  EXPECT_EQ(last_stats_.cluster_rows, 5);  // rows 0-3 and 6
}

// Small enough for racecheck: one row each of the paths (certified, band,
// exact fallback, a gathered and a re-scanned one-bin frontier, NaN, L <= K,
// L below the sampled length), K = 512, rows of the route's narrowest bucket.
TEST_P(ClusterRouteTest, SanitizerSmallRows) {
  CudaSelectorConfig c;
  c.sample_run = 1;
  c.sample_stride = 64;  // the view the stride-periodic rows are built against
  MAKE_CLUSTER_OR_SKIP(sel, c);
  constexpr int64_t kWidth = topk::planner::kClusterTable.min_width;
  GeneratorSpec spec;
  spec.distribution = Distribution::kStridePeriodic;
  spec.rows = 8;
  spec.width = kWidth;
  spec.sample_stride = 64;
  ScoreMatrix m = testing::Generate(spec);  // FP32, edited, then typed
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < kWidth; ++i) {
    m.scores[0 * kWidth + i] = normal(rng);
    m.scores[4 * kWidth + i] = 0.7f;                                    // one bin, re-scanned
    m.scores[5 * kWidth + i] = i < 1500 ? FloatsAbove(0.7f, i) : -2.f;  // one bin, gathered
  }
  m.scores[6 * kWidth + 12345] = std::numeric_limits<float>::quiet_NaN();
  m.lengths[7] = 400;
  m.lengths[3] = 16000;  // below the sampled length: rank 0 alone
  m = Typed(std::move(m));
  for (int mode = 0; mode < 4; ++mode) {
    SelectOptions o;
    o.sorted = mode & 1;
    o.deterministic = mode & 2;
    CheckRoute(*sel, m, 512, o, "small mode " + std::to_string(mode));
    if (HasFatalFailure()) return;
  }
}

// The smallest racecheck case (racecheck on SanitizerSmallRows outlasts a
// device call on the 16-CTA variants): one unsorted call over five rows of
// the route's narrowest bucket -- normal scores (certified), two
// stride-periodic rows under the one-float view (the band or the exact
// fallback; the counters are printed), a gathered and a re-scanned one-bin
// frontier.
TEST_P(ClusterRouteTest, RacecheckOneRowPerPath) {
  CudaSelectorConfig c;
  c.sample_run = 1;
  c.sample_stride = 64;  // the view the stride-periodic rows are built against
  MAKE_CLUSTER_OR_SKIP(sel, c);
  constexpr int64_t kWidth = topk::planner::kClusterTable.min_width;
  GeneratorSpec spec;
  spec.distribution = Distribution::kStridePeriodic;
  spec.rows = 5;
  spec.width = kWidth;
  spec.sample_stride = 64;
  ScoreMatrix m = testing::Generate(spec);  // FP32, edited, then typed
  std::mt19937_64 rng(9);
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < kWidth; ++i) {
    m.scores[0 * kWidth + i] = normal(rng);
    m.scores[3 * kWidth + i] = 0.7f;                                    // one bin, re-scanned
    m.scores[4 * kWidth + i] = i < 1500 ? FloatsAbove(0.7f, i) : -2.f;  // one bin, gathered
  }
  m = Typed(std::move(m));
  CheckRoute(*sel, m, 512, {}, "racecheck rows");
  std::printf("racecheck rows: band %lld exact fallback %lld rescans %lld\n",
              static_cast<long long>(last_stats_.band_rescued),
              static_cast<long long>(last_stats_.exact_recovery),
              static_cast<long long>(last_stats_.rescans));
}

// The band path under racecheck (RacecheckOneRowPerPath's rows take the
// exact fallback, not the band): one row of the route's narrowest bucket
// built on the one-float view (stride 64, row 0's phase). The view holds
// q0 + 1 values of 8.0 and q1 - q0 + 1 of 4.0 (q0, q1: the proposal and rescue
// quotas at K = 512), so t0 is 8.0's coarse cutoff and t1 4.0's; 512 more
// 4.0s off the view leave the certified set at q0 + 1 < K and the band above
// K, so certified + band reach K: the band path, no exact fallback.
TEST_P(ClusterRouteTest, RacecheckBandRow) {
  CudaSelectorConfig c;
  c.sample_run = 1;
  c.sample_stride = 64;
  MAKE_CLUSTER_OR_SKIP(sel, c);
  constexpr int64_t kWidth = topk::planner::kClusterTable.min_width;
  constexpr int32_t kK = 512;
  const int64_t q0 = ProposalQuota(kK, 64);
  const int64_t q1 = RescueQuota(kK, 64);
  ASSERT_LT(q0, q1);
  const int64_t phase = SamplePhase(0, 64);
  GeneratorSpec spec;
  spec.rows = 1;
  spec.width = kWidth;
  ScoreMatrix m = testing::Generate(spec);  // FP32, overwritten, then typed
  for (int64_t i = 0; i < kWidth; ++i) m.scores[i] = -4.f;
  for (int64_t j = 0; j < q1 + 2; ++j) m.scores[phase + 64 * j] = j <= q0 ? 8.f : 4.f;
  for (int64_t j = 0; j < kK; ++j) m.scores[(phase + 1 + 128 * j) % kWidth] = 4.f;
  m = Typed(std::move(m));
  CheckRoute(*sel, m, kK, {}, "band row");
  if (HasFatalFailure()) return;
  EXPECT_EQ(last_stats_.band_rescued, 1) << "the band path did not run";
  EXPECT_EQ(last_stats_.exact_recovery, 0);
}

// The paper's one-float view on stride-periodic rows underfills tau0: the
// band (kept apart in the same pass) and the exact fallback (all-reduced
// coarse histogram of every segment) must both run. More rows than clusters,
// so clusters take rows in turn.
TEST_P(ClusterRouteTest, BandRescueAndExactFallbackOnStridePeriodicRows) {
  CudaSelectorConfig c;
  c.sample_run = 1;
  c.sample_stride = 64;  // the view the stride-periodic rows are built against
  MAKE_CLUSTER_OR_SKIP(sel, c);
  GeneratorSpec spec;
  spec.distribution = Distribution::kStridePeriodic;
  spec.rows = 64;
  spec.width = 200000;
  spec.sample_stride = 64;
  const ScoreMatrix m = Gen(spec);
  for (bool deterministic : {false, true}) {
    SelectOptions o;
    o.deterministic = deterministic;
    CheckRoute(*sel, m, 2048, o, deterministic ? "stride periodic det" : "stride periodic");
    if (HasFatalFailure()) return;
    std::printf("cluster %d x %d: sampled %lld certified %lld band %lld exact %lld rescans %lld\n",
                Ranks(), PerSm(), static_cast<long long>(last_stats_.sampled),
                static_cast<long long>(last_stats_.certified),
                static_cast<long long>(last_stats_.band_rescued),
                static_cast<long long>(last_stats_.exact_recovery),
                static_cast<long long>(last_stats_.rescans));
    EXPECT_GT(last_stats_.band_rescued, 0) << "the band path did not run";
    EXPECT_GT(last_stats_.exact_recovery, 0) << "the exact fallback did not run";
  }
}

// Constant, all -inf and one-bin rows of 1M: every value is admitted, the
// frontier exceeds rank 0's store and refinement re-scans the row.
TEST_P(ClusterRouteTest, DegenerateLongRows) {
  MAKE_CLUSTER_OR_SKIP(sel);
  for (Distribution d :
       {Distribution::kConstant, Distribution::kAllMinusInf, Distribution::kOneBinCluster}) {
    GeneratorSpec spec;
    spec.distribution = d;
    spec.rows = 2;
    spec.width = 1 << 20;
    const ScoreMatrix m = Gen(spec);
    SelectOptions o;
    o.deterministic = true;
    CheckRoute(*sel, m, 2048, o, std::string(testing::DistributionName(d)) + " det");
    if (HasFatalFailure()) return;
    EXPECT_GT(last_stats_.rescans, 0);
  }
}

// One captured graph replayed for live M in {0, 1, grid-1, grid, grid+1,
// cap} (grid in CTAs: more live rows than clusters) with new lengths and
// buffers each time.
TEST_P(ClusterRouteTest, GraphReplayWithLiveRows) {
  MAKE_CLUSTER_OR_SKIP(sel);
  const int64_t clusters = Clusters(sel->device_info());
  std::printf("cluster %d x %d CTAs per SM: %lld resident clusters\n", Ranks(), PerSm(),
              static_cast<long long>(clusters));
  const int64_t cap = clusters * Ranks() + 2;
  auto plan = sel->MakePlan(ProblemShape{2048, cap, 65536, Layout::kPitched, Dtype()}, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->route, Route::kClusterSampled);
  ASSERT_EQ(plan->grid, clusters * Ranks());
  CheckGraphReplayOverLiveRows(*sel, *plan, 65536, 2600);
}

std::string ClusterName(const ::testing::TestParamInfo<SelectorParam>& info) {
  const int v = std::get<0>(info.param);
  return "Ranks" + std::to_string(v / 10) + "x" + std::to_string(v % 10) + "_" +
         std::string(ScoreTypeName(std::get<1>(info.param)));
}

// 8 or 16 CTAs per cluster, 1 or 2 CTAs per SM, every score type.
INSTANTIATE_TEST_SUITE_P(ClusterVariants, ClusterRouteTest,
                         ::testing::Combine(::testing::Values(81, 82, 161, 162),
                                            ::testing::ValuesIn(kAllScoreTypes)),
                         ClusterName);

}  // namespace
}  // namespace topk::cuda_test
