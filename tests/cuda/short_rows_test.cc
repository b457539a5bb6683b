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

#include "selector_fixture.h"
#include "short_row_matrices.h"

namespace topk::cuda_test {
namespace {

// --- Short rows: the row-local exact route (N_cap below the crossover) ----

// Every generator x K x layout x mode on the short-row bucket (every row on
// the row-local exact route), padding NaN / 1e9, verifier + reference; both
// kernel variants. The short-row route is off here: this suite is about the
// persistent kernel's exact route (ShortRowRouteTest covers the other).
class ShortRowTest : public CudaSelectorTest {
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
          ASSERT_OK(testing::VerifySelection(m.batch(), k, o, out.data(), status.data()));
          std::vector<int32_t> ref(out.size());
          std::vector<RowStatus> ref_status(m.rows);
          ASSERT_OK(
              testing::ReferenceSelect(m.batch(), k, o, OutputView{ref.data(), ref_status.data()}));
          for (int64_t r = 0; r < m.rows; ++r) {
            ASSERT_EQ(status[r], ref_status[r]) << what << " row " << r;
            // L <= K rows and deterministic rows are unique answers.
            if (o.deterministic || m.lengths[r] <= k) {
              ASSERT_EQ(0, std::memcmp(ref.data() + r * k, out.data() + r * k, k * 4))
                  << what << ": row " << r << " (L " << m.lengths[r] << ") differs";
            }
          }
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
  const int32_t k = 512;
  ScoreMatrix m = ShortRowsOf(Dtype(), Distribution::kIndexer, k, Layout::kPitched, 1e9f, 3);
  // Rows: 0..8 lengths {0, 1, k-1, k, k+1, T-1, T, rand, rand}.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  SetScore(m, 2 * m.pitch + k - 2, nan);         // L <= K row
  SetScore(m, 4 * m.pitch + 0, nan);             // first value (head scalar or body)
  SetScore(m, 5 * m.pitch + kShortT - 2, nan);   // last value of L = T-1 (tail)
  SetScore(m, 6 * m.pitch + 7000, nan);          // body
  SetScore(m, 7 * m.pitch + m.lengths[7], nan);  // just beyond L: ignored
  m.lengths[3] = -1;
  m.lengths[8] = static_cast<int32_t>(kShortT + 1);  // > width
  std::vector<int32_t> out;
  std::vector<RowStatus> status;
  Plan plan;
  RunOn(*sel, m, k, {}, &out, &status, &plan);
  ASSERT_EQ(plan.route, Route::kRowLocalExact);
  const RowStatus want[] = {RowStatus::kOk,        RowStatus::kOk,  RowStatus::kNan,
                            RowStatus::kBadLength, RowStatus::kNan, RowStatus::kNan,
                            RowStatus::kNan,       RowStatus::kOk,  RowStatus::kBadLength};
  for (int r = 0; r < 9; ++r) {
    EXPECT_EQ(status[r], want[r]) << "row " << r;
    if (want[r] != RowStatus::kOk) {
      for (int i = 0; i < k; ++i) ASSERT_EQ(out[r * k + i], -1) << "row " << r;
    }
  }
  EXPECT_EQ(out[0], -1);  // L = 0
  EXPECT_EQ(out[k], 0);   // L = 1
  EXPECT_EQ(out[k + 1], -1);
  // Row 7 (NaN just beyond L) alone through the verifier.
  const RowBatch one = OneRow(m, 7);
  ASSERT_OK(testing::VerifySelection(one, k, {}, out.data() + 7 * k, status.data() + 7));
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
