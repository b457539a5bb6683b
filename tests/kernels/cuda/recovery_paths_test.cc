// GPU tests of the rows that leave the common path: the tau1 band rescue and
// exact coarse recovery after an underfilled sample, the KV-split underfill
// fallback, refinement levels that re-scan the row, warp segments that
// overflow to the CTA's global slice, and narrow value ranges. Each is small
// enough for compute-sanitizer memcheck and racecheck. Skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "selector_fixture.h"
#include "topk/algorithm_constants.h"

namespace topk::cuda_test {
namespace {

// Every rare path in its own fixture so the sanitizer step can name them
// all with one filter (RecoveryPathTest.*).
class RecoveryPathTest : public CudaSelectorTest {
 protected:
  // Selects m (K = 2048) in both modes on sel, exact (deterministic
  // bit-identical), on `route`, and asserts from the route statistics that
  // both the band rescue and exact recovery ran; `also` adds checks of the
  // same statistics.
  void CheckBothPathsRan(CudaSelector& sel, const ScoreMatrix& m, Route route,
                         const std::string& name,
                         const std::function<void(const std::string&)>& also = {}) {
    for (bool deterministic : {false, true}) {
      SelectOptions o;
      o.deterministic = deterministic;
      const std::string what = name + (deterministic ? " deterministic" : "");
      Plan plan;
      Check(sel, m, 2048, o, what, &plan);
      if (HasFatalFailure()) return;
      EXPECT_EQ(plan.route, route) << what;
      std::printf("%s: sampled %lld certified %lld band %lld exact %lld\n", what.c_str(),
                  static_cast<long long>(last_stats_.sampled),
                  static_cast<long long>(last_stats_.certified),
                  static_cast<long long>(last_stats_.band_rescued),
                  static_cast<long long>(last_stats_.exact_recovery));
      EXPECT_GT(last_stats_.band_rescued, 0) << what << ": the band rescue did not run";
      EXPECT_GT(last_stats_.exact_recovery, 0) << what << ": exact recovery did not run";
      if (also) also(what);
    }
  }
};

// The paper's one-float view (run 1) on stride-periodic rows: the view sees a
// biased sample, so rows must go through the band or exact recovery. 64 rows
// of 200K take the KV-split route by default (its finisher hands such rows to
// SelectRow on one 512-thread CTA); with the split off they take the
// persistent route on the variant under test, so both recovery paths run on
// both variants.
TEST_P(RecoveryPathTest, StridePeriodicRowsRescueAndRecover) {
  for (bool split : {true, false}) {
    for (int run : {1, 8}) {
      CudaSelectorConfig c;
      c.sample_run = run;
      c.sample_stride = 64;  // the view the stride-periodic rows are built against
      c.enable_kv_split = split;
      auto sel = Make(c);
      ASSERT_NE(sel, nullptr);
      GeneratorSpec spec;
      spec.distribution = Distribution::kStridePeriodic;
      spec.rows = 64;
      spec.width = 200000;
      spec.sample_stride = 64;
      const ScoreMatrix m = Gen(spec);
      Plan plan;
      const std::string what =
          std::string(split ? "kv-split" : "persistent") + " run " + std::to_string(run);
      Check(*sel, m, 2048, {}, "stride periodic " + what, &plan);
      if (HasFatalFailure()) return;
      EXPECT_EQ(plan.route, split ? Route::kKvSplitSampled : Route::kPersistentSampled) << what;
      std::printf("%s: sampled %lld certified %lld band %lld exact %lld rescans %lld\n",
                  what.c_str(), static_cast<long long>(last_stats_.sampled),
                  static_cast<long long>(last_stats_.certified),
                  static_cast<long long>(last_stats_.band_rescued),
                  static_cast<long long>(last_stats_.exact_recovery),
                  static_cast<long long>(last_stats_.rescans));
      // The paper's view (run 1) is the one these rows defeat: both fallbacks
      // must have run, or this test no longer covers them.
      if (run == 1) {
        EXPECT_GT(last_stats_.band_rescued, 0) << what;
        EXPECT_GT(last_stats_.exact_recovery, 0) << what;
      }
    }
  }
}

// Rows built against the stride-64 view (8-float runs at 8 * SamplePhase(r, 64)
// in every block of 512 positions): the first 50 view samples of each row sit
// in one high coarse bin (q0 = 48 <= 50 < q1 = 56 for K = 2048), so tau0 admits
// 50 values and the certification underfills. Even rows ("band") also hold
// 3000 values off the view in a lower bin that tau1's bin reaches: the band
// pass rescues them. Odd rows ("exact") have nothing but small values below
// the view's, so tau1 admits ~100 and exact coarse recovery must run.
ScoreMatrix DefaultViewAdversary(int64_t rows, int64_t width, uint64_t seed) {
  GeneratorSpec spec;
  spec.rows = rows;
  spec.width = width;
  ScoreMatrix m = testing::Generate(spec);
  constexpr int64_t kRun = 8, kGroup = kRun * 64;
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> u01(0.f, 1.f);
  std::vector<char> on_view(width);
  const float band_share = 6000.f / static_cast<float>(width);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = m.scores.data() + r * m.pitch;
    const int64_t offset = int64_t{SamplePhase(r, 64)} * kRun;
    std::fill(on_view.begin(), on_view.end(), 0);
    int64_t t = 0;
    for (int64_t block = 0; block < width; block += kGroup) {
      for (int64_t j = 0; j < kRun && block + offset + j < width; ++j, ++t) {
        const int64_t i = block + offset + j;
        on_view[i] = 1;
        // 50 in the high bin [992, 1008) of every type's coarse map, the rest
        // of the view in [0.5, 1).
        row[i] = t < 50 ? 994.f + 10.f * u01(rng) : 0.5f + 0.5f * u01(rng);
      }
    }
    int64_t placed = 0;
    for (int64_t i = 0; i < width; ++i) {
      if (on_view[i]) continue;
      // Band rows: 3000 values in [10, 10.25), one coarse bin, spread over
      // the row (about 6000 / width of the positions: 3 % at 200K); the rest
      // below every view value.
      const bool band = r % 2 == 0 && placed < 3000 && u01(rng) < band_share;
      row[i] = band ? 10.02f + 0.18f * u01(rng) : 0.45f * u01(rng);
      placed += band ? 1 : 0;
    }
  }
  return m;
}

// The stride-64 view on DefaultViewAdversary rows: band rescue and exact
// recovery both run on the persistent route (the variant under test), through
// the KV-split route's underfill fallback and on the cluster route (which
// samples the same positions), all exact, deterministic mode bit-identical.
// The route statistics prove each path ran.
TEST_P(RecoveryPathTest, DefaultViewAdversaryRescuesAndRecovers) {
  const ScoreMatrix m = Typed(DefaultViewAdversary(8, 200000, 77));
  struct Case {
    const char* name;
    Route route;
    bool kv_split;
    int cluster_route;  // -1 off, 1 forced
  };
  for (const Case& route_case : {Case{"kv-split", Route::kKvSplitSampled, true, -1},
                                 Case{"persistent", Route::kPersistentSampled, false, -1},
                                 Case{"cluster", Route::kClusterSampled, false, 1}}) {
    CudaSelectorConfig c;  // the view the rows defeat: sample_run 8, stride 64
    c.sample_stride = 64;
    c.enable_kv_split = route_case.kv_split;
    c.cluster_route = route_case.cluster_route;
    ASSERT_EQ(c.sample_run, 8);
    auto sel = Make(c);
    ASSERT_NE(sel, nullptr);
    CheckBothPathsRan(*sel, m, route_case.route,
                      std::string("default-view adversary ") + route_case.name);
    if (HasFatalFailure()) return;
  }
}

// The recovery paths at a size racecheck finishes (DefaultViewAdversary
// takes minutes per instance under it): a band row and an exact row of 64K,
// and a row whose view is too small for the quotas (2500 values, 39 samples,
// with min_sampled_length lowered), on the persistent route with and without
// the shared-memory ring (the ring's early stages must land before the exact
// route reuses their buffers) and on the KV-split route's underfill fallback.
TEST_P(RecoveryPathTest, RacecheckRecoveryRows) {
  ScoreMatrix m = Typed(DefaultViewAdversary(3, 65536, 91));
  m.lengths[2] = 2500;
  struct Case {
    const char* name;
    Route route;
    bool kv_split;
    int admit_ring;
  };
  for (const Case& route_case : {Case{"persistent", Route::kPersistentSampled, false, 0},
                                 Case{"persistent ring", Route::kPersistentSampled, false, 1},
                                 Case{"kv-split", Route::kKvSplitSampled, true, 0}}) {
    // The KV-split kernel runs 512 threads whatever the persistent variant.
    if (route_case.kv_split && Ctas() == 4) continue;
    CudaSelectorConfig c = route_case.kv_split ? KvSplitConfig() : CudaSelectorConfig{};
    c.enable_kv_split = route_case.kv_split;
    c.cluster_route = -1;
    c.enable_short_rows = false;
    c.admit_ring = route_case.admit_ring;
    c.min_sampled_length = 2048;
    c.sample_stride = 64;                           // the view DefaultViewAdversary defeats
    if (route_case.kv_split) c.kv_split_force = 4;  // 3 rows of 64K: split on any plan
    auto sel = Make(c);
    ASSERT_NE(sel, nullptr);
    // Row 2 reached the sampled branch and found its view unusable: two
    // sampled rows, and it took the exact route beside the recovered one.
    CheckBothPathsRan(*sel, m, route_case.route,
                      std::string("racecheck recovery rows ") + route_case.name,
                      [&](const std::string& what) {
                        EXPECT_EQ(last_stats_.sampled, 2) << what;
                        EXPECT_GE(last_stats_.exact_rows, 2) << what;
                      });
    if (HasFatalFailure()) return;
  }
}

// The KV-split route on the same stride-periodic rows: a split row whose
// segments admit fewer than K candidates (or whose view is unusable) goes to
// one CTA (band, then exact recovery) and stays exact.
TEST_P(RecoveryPathTest, KvSplitUnderfillFallsBackToOneCta) {
  // The KV-split kernel runs 512 threads whatever the persistent variant.
  if (Ctas() == 4) GTEST_SKIP() << "KV-split: one variant";
  CudaSelectorConfig c = KvSplitConfig();
  c.sample_run = 1;
  c.sample_stride = 64;  // the view the stride-periodic rows are built against
  auto sel = Make(c);
  ASSERT_NE(sel, nullptr);
  GeneratorSpec spec;
  spec.distribution = Distribution::kStridePeriodic;
  spec.rows = 8;
  spec.width = 200000;
  spec.sample_stride = 64;
  const ScoreMatrix m = Gen(spec);
  for (bool deterministic : {false, true}) {
    SelectOptions o;
    o.deterministic = deterministic;
    std::vector<int32_t> out;
    std::vector<RowStatus> status;
    Plan plan;
    RunOn(*sel, m, 2048, o, &out, &status, &plan);
    if (HasFatalFailure()) return;
    ASSERT_EQ(plan.route, Route::kKvSplitSampled);
    ASSERT_OK(testing::VerifySelection(m.batch(), 2048, o, out.data(), status.data()));
    if (deterministic) {
      std::vector<int32_t> ref(out.size());
      ASSERT_OK(testing::ReferenceSelect(m.batch(), 2048, o, OutputView{ref.data(), nullptr}));
      ASSERT_EQ(ref, out);
    }
    EXPECT_GT(last_stats_.band_rescued + last_stats_.exact_recovery, 0)
        << "no split row left the split: the fallback is not covered";
  }
}

// Constant, all -inf and one-bin rows of 1M: the frontier exceeds every store
// and refinement re-scans the row.
// Both the KV-split kernel (3 rows: the default plan) and the persistent one.
TEST_P(RecoveryPathTest, DegenerateLongRowsRescan) {
  CudaSelectorConfig no_split;
  no_split.enable_kv_split = false;
  for (bool split : {true, false}) {
    auto sel = split ? Make(KvSplitConfig()) : Make(no_split);
    ASSERT_NE(sel, nullptr);
    for (Distribution d :
         {Distribution::kConstant, Distribution::kAllMinusInf, Distribution::kOneBinCluster}) {
      GeneratorSpec spec;
      spec.distribution = d;
      spec.rows = 3;
      spec.width = 1 << 20;
      const ScoreMatrix m = Gen(spec);
      SelectOptions o;
      o.deterministic = true;
      const std::string what =
          std::string(testing::DistributionName(d)) + (split ? " kv-split" : " persistent");
      Check(*sel, m, 2048, o, what);
      Check(*sel, m, 4096, {}, what + " nondet");
      if (HasFatalFailure()) return;
    }
  }
}

// The main pass gives each warp a private segment of the shared store; a
// row whose large values all fall in warp 0's chunks (positions p with
// p mod 2048 < 128 on 16-byte aligned rows) overflows that segment into the
// CTA's global slice while the other segments stay empty. Sampled route, band
// and exact routes (K = 4096, sampling off), all bit-identical to the
// reference in deterministic mode.
TEST_P(RecoveryPathTest, WarpSegmentOverflowToGlobalSlice) {
  GeneratorSpec spec;
  spec.distribution = Distribution::kIndexer;
  spec.rows = 6;
  spec.width = 262144;
  spec.seed = 4242;
  ScoreMatrix fp32 = testing::Generate(spec);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> big(100.f, 200.f);
  for (int64_t r = 0; r < fp32.rows; ++r) {
    for (int64_t p = 0; p < fp32.width; ++p) {
      if (p % 2048 < 128) fp32.scores[r * fp32.pitch + p] = big(rng);
    }
  }
  // 16-bit rows: 8 values per load, so the large values land in warp 0's
  // and warp 8's chunks; both segments overflow just the same.
  const ScoreMatrix m = Typed(std::move(fp32));
  CudaSelectorConfig no_split;
  no_split.enable_kv_split = false;
  auto sampled = Make(no_split);
  CudaSelectorConfig off;
  off.enable_sampling = false;
  auto exact = Make(off);
  ASSERT_TRUE(sampled && exact);
  SelectOptions o;
  o.deterministic = true;
  Check(*sampled, m, 2048, o, "warp 0 overflow, sampled");
  EXPECT_EQ(last_stats_.sampled, m.rows);
  EXPECT_GT(last_stats_.candidates, 2048 * m.rows);
  Check(*sampled, m, 2048, {}, "warp 0 overflow, sampled, non-deterministic");
  Check(*exact, m, 4096, o, "warp 0 overflow, exact route");
  Check(*exact, m, 4096, {}, "warp 0 overflow, exact route, non-deterministic");
}

// Refinement starts below the key bits every candidate shares: rows whose
// values differ only in their low 12 bits (two key levels: 11 + 1 bits) or 8
// bits (capped at one 11-bit key level; heavy ties), on both kernels, all
// modes, bit-identical to the reference in deterministic mode. 16-bit rows:
// the low 10 or 6 bits of the 16-bit pattern (their keys differ above bit
// 16 or 13 of the widened key).
TEST_P(RecoveryPathTest, NarrowValueRangesShareKeyPrefixes) {
  CudaSelectorConfig no_split;
  no_split.enable_kv_split = false;
  for (int low_bits : {12, 8}) {
    GeneratorSpec spec;
    spec.rows = 8;
    spec.width = 100000;
    spec.seed = 31 + low_bits;
    ScoreMatrix m = Typed(testing::Generate(spec));
    std::mt19937 rng(low_bits);
    for (float& x : m.scores) {
      const uint32_t bits = 0x447A0000u + (rng() & ((1u << low_bits) - 1u));  // 1000.0f + ulps
      std::memcpy(&x, &bits, sizeof(x));
    }
    // 1000.0 in BF16 and FP16, plus units of the last place.
    const uint32_t base16 = Dtype() == ScoreType::kBFloat16 ? 0x447Au : 0x63D0u;
    for (uint16_t& h : m.scores16) {
      h = static_cast<uint16_t>(base16 + (rng() & ((1u << (low_bits - 2)) - 1u)));
    }
    for (bool split : {true, false}) {
      auto sel = split ? Make(KvSplitConfig()) : Make(no_split);
      ASSERT_NE(sel, nullptr);
      for (int mode = 0; mode < 4; ++mode) {
        SelectOptions o;
        o.sorted = mode & 1;
        o.deterministic = mode & 2;
        Check(*sel, m, 2048, o,
              "low bits " + std::to_string(low_bits) + (split ? " kv-split" : " persistent") +
                  " mode " + std::to_string(mode));
        if (HasFatalFailure()) return;
      }
    }
  }
}

// The K-th value repeated R times at random positions, under 2030 larger
// values (K = 2048 takes 18 of the run): refinement's boundary bin holds the R equal keys, finished
// by rank when R <= the block size (one warp, several warps, a full block)
// and by the digit levels above it. Every mode, both kernels; deterministic
// mode bit-identical to the reference (the smallest indices of the run).
TEST_P(RecoveryPathTest, BoundaryTiesFinishByRank) {
  CudaSelectorConfig no_split;
  no_split.enable_kv_split = false;
  for (int run : {30, 200, 256, 257, 1000}) {
    GeneratorSpec spec;
    spec.rows = 3;
    spec.width = 70000;  // 3 rows of 70000: the KV-split route by default
    spec.seed = 600 + run;
    ScoreMatrix fp32 = testing::Generate(spec);
    std::mt19937 rng(run);
    std::uniform_real_distribution<float> small(0.f, 1.f), large(100.f, 1000.f);
    for (int64_t r = 0; r < fp32.rows; ++r) {
      float* row = fp32.scores.data() + r * fp32.pitch;
      std::vector<int64_t> pos(fp32.width);
      for (int64_t i = 0; i < fp32.width; ++i) pos[i] = i;
      std::shuffle(pos.begin(), pos.end(), rng);
      for (int64_t i = 0; i < fp32.width; ++i) {
        // 2030 large values, the run of 5.0 (18 of it selected), small ones.
        row[pos[i]] = i < 2030 ? large(rng) : (i < 2030 + run ? 5.0f : small(rng));
      }
    }
    const ScoreMatrix m = Typed(std::move(fp32));
    for (bool split : {true, false}) {
      auto sel = split ? Make() : Make(no_split);
      ASSERT_NE(sel, nullptr);
      for (int mode = 0; mode < 4; ++mode) {
        SelectOptions o;
        o.sorted = mode & 1;
        o.deterministic = mode & 2;
        Check(*sel, m, 2048, o,
              "run " + std::to_string(run) + (split ? " kv-split" : " persistent") + " mode " +
                  std::to_string(mode));
        if (HasFatalFailure()) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KernelVariants, RecoveryPathTest, AllVariantsAllTypes(), VariantName);

}  // namespace
}  // namespace topk::cuda_test
