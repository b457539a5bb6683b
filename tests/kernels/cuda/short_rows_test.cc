// GPU tests of the short-row bucket on the persistent kernel's exact route
// (Route::kRowLocalExact: N_cap below the sampled route's crossover, the
// short-row route off; short_row_route_test.cc tests that route): every
// generator, K, layout and mode with padding around the rows, NaN and bad
// lengths, graph replays. Skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "route_test_rows.h"
#include "selector_fixture.h"
#include "short_row_matrices.h"

namespace topk::cuda_test {
namespace {

// --- Short rows: the row-local exact route (N_cap below the crossover) ----

// Every generator x K x layout x mode on the short-row bucket (every row on
// the row-local exact route), padding NaN / 1e9, verifier + reference; both
// kernel variants. The short-row route is off here: this suite is about the
// persistent kernel's exact route (ShortRowRouteTest covers the other).
class ShortRowTest : public ShortRowSuiteTest {
 protected:
  std::unique_ptr<CudaSelector> MakePersistent() {
    CudaSelectorConfig c;
    c.enable_short_rows = false;
    return Make(c);
  }
};

TEST_P(ShortRowTest, EveryGeneratorEveryKBothLayoutsAllModes) {
  auto sel = MakePersistent();
  ASSERT_NE(sel, nullptr);
  uint64_t seed = 1;
  for (Distribution d : testing::kAllDistributions) {
    for (int32_t k : {1, 64, 512, 2048, 4096}) {
      for (Layout layout : {Layout::kPitched, Layout::kPacked}) {
        for (int mode = 0; mode < 4; ++mode) {
          const float padding = (mode & 1) ? std::numeric_limits<float>::quiet_NaN() : 1e9f;
          const ScoreMatrix m = ShortRowsOf(Dtype(), d, k, layout, padding, ++seed);
          SelectOptions o;
          o.sorted = mode & 1;
          o.deterministic = mode & 2;
          std::vector<int32_t> out;
          std::vector<RowStatus> status;
          Plan plan;
          RunOn(*sel, m, k, o, &out, &status, &plan);
          if (HasFatalFailure()) return;
          ASSERT_EQ(plan.route, Route::kRowLocalExact);
          const std::string what = std::string(testing::DistributionName(d)) +
                                   " k=" + std::to_string(k) +
                                   (layout == Layout::kPacked ? " packed" : " pitched") + " mode " +
                                   std::to_string(mode);
          ExpectReferenceAnswer(m, k, o, out, status, what);
          if (HasFatalFailure()) return;
          int64_t served = 0;
          for (int32_t L : m.lengths) served += L > k ? 1 : 0;
          ASSERT_EQ(last_stats_.exact_rows, served) << what;
          ASSERT_EQ(last_stats_.rescans, 0) << what;
        }
      }
    }
  }
}

TEST_P(ShortRowTest, NanRowsAndBadLengths) {
  auto sel = MakePersistent();
  ASSERT_NE(sel, nullptr);
  CheckNanAndBadLengthRows(*sel, Route::kRowLocalExact);
}

// One captured graph replayed for live M in {0, 1, grid-1, grid, grid+1,
// cap} with new lengths and buffers; rows beyond live M stay untouched.
TEST_P(ShortRowTest, GraphReplayWithLiveRows) {
  auto sel = MakePersistent();
  ASSERT_NE(sel, nullptr);
  const int32_t k = 2048;
  const CudaDeviceInfo& info = sel->device_info();
  const int64_t grid = int64_t{info.sm_count} *
                       (Ctas() == 4 ? info.small_block_ctas_per_sm : info.persistent_ctas_per_sm);
  const int64_t cap = grid + 40;
  auto plan = sel->MakePlan(ProblemShape{k, cap, kShortT, Layout::kPitched, Dtype()}, {});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->route, Route::kRowLocalExact);
  ASSERT_EQ(plan->grid, grid);
  CheckGraphReplayOverLiveRows(*sel, *plan, kShortT, 900);
}

// Small configuration for compute-sanitizer (memcheck, racecheck).
TEST_P(ShortRowTest, SanitizerSmall) {
  auto sel = MakePersistent();
  ASSERT_NE(sel, nullptr);
  for (Distribution d : {Distribution::kIndexer, Distribution::kConstant, Distribution::kFp8Ties}) {
    for (Layout layout : {Layout::kPitched, Layout::kPacked}) {
      SelectOptions o;
      o.deterministic = true;
      o.sorted = d != Distribution::kFp8Ties;
      Check(*sel, ShortRowsOf(Dtype(), d, 256, layout, std::numeric_limits<float>::quiet_NaN(), 11),
            256, o, "short-row sanitizer");
      if (HasFatalFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KernelVariants, ShortRowTest, AllVariantsAllTypes(), VariantName);

}  // namespace
}  // namespace topk::cuda_test
