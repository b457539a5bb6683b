// GPU tests of the persistent route with the tau1 band kept apart in the main
// pass (CudaSelectorConfig::band_apart): stride-periodic rows under the
// one-float view, whose certified sets underfill K on many rows, in one wave
// of the persistent grid (the planner's own choice there), finished from
// certified + band without a second read of the row: the band-apart count of
// the route statistics shows the path ran, the answer is exact in every mode
// and bit-identical to the same selector with the band pass (band_apart = 0)
// in deterministic mode; a small case for the sanitizers. Both kernel
// variants, every score type. Every test asserts the route in the plan.
// Skips without a device.
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "selector_fixture.h"

namespace topk::cuda_test {
namespace {

class BandApartTest : public CudaSelectorTest {
 protected:
  // The persistent route for few rows (no KV-split, no cluster route), the
  // one-float view; band_apart -1 is the planner's choice.
  std::unique_ptr<CudaSelector> MakeApart(int band_apart, int admit_ring = -1) {
    CudaSelectorConfig c;
    c.admit_ring = admit_ring;
    c.enable_kv_split = false;
    c.cluster_route = -1;
    c.sample_run = 1;
    c.band_apart = band_apart;
    return Make(c);
  }
  ScoreMatrix StridePeriodic(int64_t rows, int64_t width) const {
    GeneratorSpec spec;
    spec.distribution = Distribution::kStridePeriodic;
    spec.rows = rows;
    spec.width = width;
    spec.sample_stride = 64;
    return Gen(spec);
  }
  // Runs m on sel in `mode` (bit 0 sorted, bit 1 deterministic), checks it
  // (Check: verifier, and the reference in deterministic mode) and returns
  // the output.
  std::vector<int32_t> RunChecked(CudaSelector& sel, const ScoreMatrix& m, int32_t k, int mode,
                                  const std::string& what) {
    SelectOptions o;
    o.sorted = mode & 1;
    o.deterministic = mode & 2;
    Plan plan;
    Check(sel, m, k, o, what, &plan);
    if (HasFatalFailure()) return {};
    EXPECT_EQ(plan.route, Route::kPersistentSampled) << what;
    std::vector<int32_t> out;
    std::vector<RowStatus> status;
    RunOn(sel, m, k, o, &out, &status);
    return out;
  }
};

// 64 stride-periodic rows of 128K (every mode) on the planner's choice (64
// rows on at least 64 CTAs: band apart): on the cluster route, which takes
// the same tau0 / tau1 from the same view, 18 of such 64 rows needed the
// band. Band rows finish from the band kept apart; with band_apart = 0 the
// same rows take the band pass and no row counts as band apart.
TEST_P(BandApartTest, StridePeriodicRowsInOneWave) {
  auto apart = MakeApart(-1);
  auto pass = MakeApart(0);
  ASSERT_NE(apart, nullptr);
  ASSERT_NE(pass, nullptr);
  const ScoreMatrix m = StridePeriodic(64, 131072);
  for (int mode = 0; mode < 4; ++mode) {
    const std::string what = "stride-periodic mode " + std::to_string(mode);
    const std::vector<int32_t> a = RunChecked(*apart, m, 2048, mode, what + ", band apart");
    if (HasFatalFailure()) return;
    const CudaRouteStats sa = last_stats_;
    std::printf("mode %d: certified %lld band %lld (apart %lld) exact %lld\n", mode,
                static_cast<long long>(sa.certified), static_cast<long long>(sa.band_rescued),
                static_cast<long long>(sa.band_apart), static_cast<long long>(sa.exact_recovery));
    EXPECT_GT(sa.band_apart, 0) << what << ": the band-apart path did not run";
    EXPECT_LE(sa.band_apart, sa.band_rescued) << what;
    const std::vector<int32_t> b = RunChecked(*pass, m, 2048, mode, what + ", band pass");
    if (HasFatalFailure()) return;
    EXPECT_EQ(last_stats_.band_apart, 0) << what;
    // The same cutoffs either way: the same rows certify, take the band or
    // fall back.
    EXPECT_EQ(last_stats_.certified, sa.certified) << what;
    EXPECT_EQ(last_stats_.band_rescued, sa.band_rescued) << what;
    EXPECT_EQ(last_stats_.exact_recovery, sa.exact_recovery) << what;
    if (mode & 2) EXPECT_EQ(a, b) << what << ": deterministic outputs differ";
  }
}

// Small enough for the sanitizers: 24 stride-periodic rows of 64K with the
// band kept apart (certified, band-apart and exact-fallback rows; 3-4 band
// rows by the CPU backend's count on the same view), a constant row (its
// admitted set exceeds the CTA's stores: the re-scans) and a row with a NaN;
// with register loads and through the shared-memory ring (admit_ring 1).
TEST_P(BandApartTest, SanitizerSmall) {
  GeneratorSpec spec;
  spec.distribution = Distribution::kStridePeriodic;
  spec.rows = 24;
  spec.width = 65536;
  spec.sample_stride = 64;
  ScoreMatrix m = testing::Generate(spec);
  for (int64_t i = 0; i < spec.width; ++i) m.scores[22 * spec.width + i] = 0.25f;
  m.scores[23 * spec.width + 777] = std::numeric_limits<float>::quiet_NaN();
  m = Typed(std::move(m));
  for (int ring : {0, 1}) {
    auto apart = MakeApart(1, ring);
    ASSERT_NE(apart, nullptr);
    for (int mode : {0, 3}) {
      SelectOptions o;
      o.sorted = mode & 1;
      o.deterministic = mode & 2;
      const std::string what =
          "small ring " + std::to_string(ring) + " mode " + std::to_string(mode);
      Plan plan;
      Check(*apart, m, 2048, o, what, &plan);
      if (HasFatalFailure()) return;
      ASSERT_EQ(plan.route, Route::kPersistentSampled) << what;
      EXPECT_GT(last_stats_.band_apart, 0) << what << ": the band-apart path did not run";
    }
  }
}

// Both persistent variants, every score type.
INSTANTIATE_TEST_SUITE_P(KernelVariants, BandApartTest, AllVariantsAllTypes(), VariantName);

}  // namespace
}  // namespace topk::cuda_test
