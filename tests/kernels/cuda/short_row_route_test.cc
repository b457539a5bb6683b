// GPU tests of the short-row route (Route::kShortRowExact: one CTA per row,
// the coarse histogram of the whole row, refinement of the boundary bin):
// every generator, K, layout and mode; a boundary bin wider than the shared
// store (the band-filtered re-scans); infinity floods; NaN and bad lengths;
// graph replays over a grid smaller than the rows; the planner's 64K bucket
// taken by the table alone. Every test asserts that the route ran (plan and
// kernel counters). Skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "route_policies.h"
#include "route_test_rows.h"
#include "selector_fixture.h"
#include "short_row_matrices.h"
#include "topk/keys.h"

namespace topk::cuda_test {
namespace {

// Every bucket up to this width takes the short-row route in these tests.
constexpr int64_t kForcedReach = int64_t{1} << 20;

class ShortRowRouteTest : public ShortRowSuiteTest {
 protected:
  std::unique_ptr<CudaSelector> MakeShortRow(CudaSelectorConfig c = {}) {
    c.short_row_max_width = kForcedReach;
    c.short_row_variant = std::get<0>(GetParam());
    auto s = CudaSelector::Create(c);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

  // Element pos of m as FP32.
  static float ValueAt(const ScoreMatrix& m, int64_t pos) {
    return m.dtype == ScoreType::kFloat32 ? m.scores[pos]
                                          : testing::WidenScore(m.scores16[pos], m.dtype);
  }

  // Runs m on the short-row route and checks every row against the verifier
  // and the reference (bit-identical where the answer is unique: L <= K or
  // deterministic), the route in the plan and in the kernel's counters.
  void CheckRoute(CudaSelector& sel, const ScoreMatrix& m, int32_t k, const SelectOptions& o,
                  const std::string& what) {
    std::vector<int32_t> out;
    std::vector<RowStatus> status;
    Plan plan;
    RunOn(sel, m, k, o, &out, &status, &plan);
    if (HasFatalFailure()) return;
    ASSERT_EQ(plan.route, Route::kShortRowExact) << what;
    ExpectReferenceAnswer(m, k, o, out, status, what);
    if (HasFatalFailure()) return;
    int64_t served = 0;
    for (int64_t r = 0; r < m.rows; ++r) {
      served += status[r] == RowStatus::kOk && m.lengths[r] > k ? 1 : 0;
    }
    ASSERT_EQ(last_stats_.short_rows, served) << what;
    ASSERT_EQ(last_stats_.rows, served) << what;
    ASSERT_EQ(last_stats_.exact_rows, 0) << what;
    ASSERT_EQ(last_stats_.sampled, 0) << what;
    ASSERT_EQ(last_stats_.exact_recovery, 0) << what;
  }
};

TEST_P(ShortRowRouteTest, EveryGeneratorEveryKBothLayoutsAllModes) {
  auto sel = MakeShortRow();
  ASSERT_NE(sel, nullptr);
  uint64_t seed = 100;
  for (Distribution d : testing::kAllDistributions) {
    for (int32_t k : {1, 64, 512, 2048, 4096}) {
      for (Layout layout : {Layout::kPitched, Layout::kPacked}) {
        for (int mode = 0; mode < 4; ++mode) {
          const float padding = (mode & 1) ? std::numeric_limits<float>::quiet_NaN() : 1e9f;
          SelectOptions o;
          o.sorted = mode & 1;
          o.deterministic = mode & 2;
          const std::string what = std::string(testing::DistributionName(d)) +
                                   " k=" + std::to_string(k) +
                                   (layout == Layout::kPacked ? " packed" : " pitched") + " mode " +
                                   std::to_string(mode);
          CheckRoute(*sel, ShortRowsOf(Dtype(), d, k, layout, padding, ++seed), k, o, what);
          if (HasFatalFailure()) return;
          // Longer rows (the 32K-64K buckets) for the rank the route is for.
          if (k == 2048 && mode != 1) {
            CheckRoute(*sel, ShortRowsOf(Dtype(), d, k, layout, padding, ++seed, 40000), k, o,
                       what + " 40K");
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// Rows whose boundary bin holds far more values than the shared store
// (kShortRowCandidates), so refinement re-scans the row, and whose values
// just above that bin share the leading key bits of the bin's values: a
// re-scan that filtered on x >= cut alone would classify them again. Row 0:
// 300 values at the bottom of the bin above, 11700 distinct values inside one
// coarse bin; row 1: the same with 50-way ties inside the bin; row 2: a
// constant row (every level's frontier is the whole row).
ScoreMatrix WideBoundaryBinRows() {
  constexpr int64_t kWidth = 12000;
  constexpr int kAbove = 300;
  const float base = 0.7f;
  const uint32_t bin = Coarse(base);
  const float above_start = CoarseCutoff(bin - 1);  // smallest value of the bin above
  ScoreMatrix m;
  m.rows = 3;
  m.width = kWidth;
  m.pitch = kWidth;
  m.scores.assign(m.rows * kWidth, 0.f);
  std::mt19937_64 rng(42);
  for (int64_t r = 0; r < 2; ++r) {
    std::vector<float> row;
    for (int i = 0; i < kAbove; ++i) row.push_back(FloatsAbove(above_start, i));
    for (int64_t i = kAbove; i < kWidth; ++i) {
      const int step = static_cast<int>(r == 0 ? i : i / 50);
      row.push_back(FloatsAbove(base, step));
    }
    std::shuffle(row.begin(), row.end(), rng);
    std::copy(row.begin(), row.end(), m.scores.begin() + r * kWidth);
  }
  std::fill(m.scores.begin() + 2 * kWidth, m.scores.end(), 3.25f);
  m.lengths.assign(m.rows, static_cast<int32_t>(kWidth));
  return m;
}

// The buckets whose rows fit the shared row buffer (kShortRowSharedRow: up to
// kShortRowMaxSharedRowBytes / 4 values, the last bucket at its edge), every
// generator, both layouts (every row start alignment), unsorted and
// sorted + deterministic.
TEST_P(ShortRowRouteTest, SharedRowBucketsEveryGenerator) {
  auto sel = MakeShortRow();
  ASSERT_NE(sel, nullptr);
  uint64_t seed = 700;
  for (int64_t width : {int64_t{8192}, int64_t{kShortRowMaxSharedRowBytes / 4}}) {
    for (Distribution d : testing::kAllDistributions) {
      for (int32_t k : {1, 2048, 4096}) {
        for (Layout layout : {Layout::kPitched, Layout::kPacked}) {
          for (int mode : {0, 3}) {
            SelectOptions o;
            o.sorted = mode & 1;
            o.deterministic = mode & 2;
            const std::string what = std::string(testing::DistributionName(d)) +
                                     " width=" + std::to_string(width) + " k=" + std::to_string(k) +
                                     (layout == Layout::kPacked ? " packed" : " pitched") +
                                     " mode " + std::to_string(mode);
            CheckRoute(*sel, ShortRowsOf(Dtype(), d, k, layout, 1e9f, ++seed, width), k, o, what);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

TEST_P(ShortRowRouteTest, BoundaryBinWiderThanTheStore) {
  // 16-bit rows: the same values rounded (the bin's values collapse into a
  // few heavily tied patterns; the bin above keeps its 300).
  const ScoreMatrix m = Typed(WideBoundaryBinRows());
  // The construction holds: one coarse bin below the bin of the 300 values.
  const float base = 0.7f;
  for (int64_t r = 0; r < 2; ++r) {
    int in_bin = 0, above = 0;
    for (int64_t i = 0; i < m.width; ++i) {
      const uint32_t c = Coarse(ValueAt(m, r * m.pitch + i));
      in_bin += c == Coarse(base) ? 1 : 0;
      above += c == Coarse(base) - 1 ? 1 : 0;
    }
    ASSERT_EQ(above, 300);
    ASSERT_EQ(in_bin, m.width - 300);
  }
  auto sel = MakeShortRow();
  ASSERT_NE(sel, nullptr);
  for (int mode = 0; mode < 4; ++mode) {
    SelectOptions o;
    o.sorted = mode & 1;
    o.deterministic = mode & 2;
    for (int32_t k : {512, 2048, 4096}) {
      CheckRoute(*sel, m, k, o,
                 "wide bin k=" + std::to_string(k) + " mode " + std::to_string(mode));
      if (HasFatalFailure()) return;
      EXPECT_GT(last_stats_.rescans, 0) << "the re-scan fallback did not run";
    }
  }
}

// +inf and -inf floods: the K-th value is +inf (ties), -inf (ties), or finite
// between them; with a NaN row and an all -inf row.
TEST_P(ShortRowRouteTest, InfinityFloods) {
  constexpr int64_t kWidth = 9000;
  ScoreMatrix m = InfinityFloodRows(5, kWidth, 7, 6000);
  m.scores[4 * kWidth + 4321] = std::numeric_limits<float>::quiet_NaN();
  m = Typed(std::move(m));
  auto sel = MakeShortRow();
  ASSERT_NE(sel, nullptr);
  for (int mode = 0; mode < 4; ++mode) {
    SelectOptions o;
    o.sorted = mode & 1;
    o.deterministic = mode & 2;
    CheckRoute(*sel, m, 2048, o, "infinity floods mode " + std::to_string(mode));
    if (HasFatalFailure()) return;
  }
}

TEST_P(ShortRowRouteTest, NanRowsAndBadLengths) {
  auto sel = MakeShortRow();
  ASSERT_NE(sel, nullptr);
  CheckNanAndBadLengthRows(*sel, Route::kShortRowExact);
  if (HasFatalFailure()) return;
  EXPECT_EQ(last_stats_.short_rows, 1);  // row 7: the only row with L > K and no NaN
}

// A grid smaller than the rows (each CTA strides over several), replayed from
// one captured graph for live M in {0, 1, grid-1, grid, grid+1, cap}.
TEST_P(ShortRowRouteTest, GraphReplayWithLiveRows) {
  CudaSelectorConfig c;
  c.grid_override = 100;
  auto sel = MakeShortRow(c);
  ASSERT_NE(sel, nullptr);
  auto plan = sel->MakePlan(ProblemShape{2048, 140, 20000, Layout::kPitched, Dtype()}, {});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->route, Route::kShortRowExact);
  ASSERT_EQ(plan->grid, 100);
  CheckGraphReplayOverLiveRows(*sel, *plan, 20000, 1700);
}

// The planner's 64K bucket (K <= topk::planner::kShortRowReach.small_k,
// topk::planner::kShortRowReach.wide_min_rows
// <= M_cap <= topk::planner::kShortRowReach.wide_max_rows) by the table alone, no forced reach:
// its edges plan this route on the device's own facts, and M_cap at the
// bucket's lower edge runs here exactly (edge lengths up to 64K on the pitched
// layout, random lengths up to 40001 on the packed one: few full rows, so the
// host reference stays cheap).
TEST_P(ShortRowRouteTest, PlannerTableTakesThe64KBucket) {
  CudaSelectorConfig c;
  c.short_row_variant = std::get<0>(GetParam());
  // The rules' bucket (the measured route table, which now sends most of it
  // to the sampled kernel, is cuda_planner_table_test's).
  c.use_route_table = false;
  auto made = CudaSelector::Create(c);
  ASSERT_TRUE(made.ok()) << made.status();
  CudaSelector& sel = **made;
  for (int64_t cap :
       {topk::planner::kShortRowReach.wide_min_rows, topk::planner::kShortRowReach.wide_max_rows}) {
    for (int64_t width : {int64_t{32769}, topk::planner::kShortRowReach.reach_small_k_wide}) {
      auto plan = sel.MakePlan(ProblemShape{topk::planner::kShortRowReach.small_k, cap, width,
                                            Layout::kPitched, Dtype()},
                               {});
      ASSERT_TRUE(plan.ok()) << plan.status();
      ASSERT_EQ(plan->route, Route::kShortRowExact) << cap << " x " << width;
      ASSERT_EQ(plan->grid, cap);
    }
  }
  uint64_t seed = 900;
  for (int32_t k : {64, topk::planner::kShortRowReach.small_k}) {
    for (Layout layout : {Layout::kPitched, Layout::kPacked}) {
      GeneratorSpec spec;
      spec.distribution =
          layout == Layout::kPitched ? Distribution::kIndexer : Distribution::kFp8Ties;
      spec.lengths = layout == Layout::kPitched ? LengthPattern::kEdges : LengthPattern::kRandom;
      spec.rows = topk::planner::kShortRowReach.wide_min_rows;
      spec.width =
          layout == Layout::kPitched ? topk::planner::kShortRowReach.reach_small_k_wide : 40001;
      spec.layout = layout;
      spec.k = k;
      spec.seed = ++seed;
      const ScoreMatrix m = Gen(spec);
      for (int mode : {0, 3}) {
        SelectOptions o;
        o.sorted = mode & 1;
        o.deterministic = mode & 2;
        CheckRoute(sel, m, k, o,
                   "64K bucket k=" + std::to_string(k) + " width " + std::to_string(m.width) +
                       " mode " + std::to_string(mode));
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Small configuration for compute-sanitizer (memcheck, racecheck): the
// constant rows take the re-scan fallback, the sorted rows the staged output.
TEST_P(ShortRowRouteTest, SanitizerSmall) {
  auto sel = MakeShortRow();
  ASSERT_NE(sel, nullptr);
  for (Distribution d : {Distribution::kIndexer, Distribution::kConstant, Distribution::kFp8Ties}) {
    for (Layout layout : {Layout::kPitched, Layout::kPacked}) {
      for (int mode : {0, 3}) {
        SelectOptions o;
        o.sorted = mode & 1;
        o.deterministic = mode & 2;
        CheckRoute(
            *sel,
            ShortRowsOf(Dtype(), d, 256, layout, std::numeric_limits<float>::quiet_NaN(), 11, 3000),
            256, o, "short-row route sanitizer");
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Both short-row kernel variants (the first element of the parameter:
// CudaSelectorConfig::short_row_variant), every score type.
INSTANTIATE_TEST_SUITE_P(ScoreTypes, ShortRowRouteTest,
                         ::testing::Combine(::testing::Values(0, kShortRowSharedRow),
                                            ::testing::ValuesIn(kAllScoreTypes)),
                         [](const ::testing::TestParamInfo<SelectorParam>& info) {
                           return "V" + std::to_string(std::get<0>(info.param)) + "_" +
                                  std::string(ScoreTypeName(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace topk::cuda_test
