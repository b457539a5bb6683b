// The CUDA planner is a pure host function: tested with a fake device.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "topk/cuda_selector.h"

namespace topk {
namespace {

CudaDeviceInfo FakeH200() {
  CudaDeviceInfo d;
  d.sm_count = 132;
  d.compute_major = 9;
  d.persistent_ctas_per_sm = 2;
  d.small_block_ctas_per_sm = 4;
  d.l2_bytes = 60u << 20;
  d.global_mem_bytes = 141ull << 30;
  return d;
}

Plan MustPlan(int32_t k, int64_t m, int64_t n, CudaSelectorConfig config = {}) {
  auto p = PlanCudaSelection(ProblemShape{k, m, n, Layout::kPitched}, {}, FakeH200(), config);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Plan{};
}

TEST(CudaPlannerTest, WideRowsTakeThePersistentSampledKernel) {
  const Plan p = MustPlan(2048, 4096, 1 << 20);
  EXPECT_EQ(p.route, Route::kPersistentSampled);
  EXPECT_EQ(p.sample_stride, 64);
  EXPECT_EQ(p.block, 512);
  EXPECT_EQ(p.grid, 264);
}

// With the short-row route off: short rows around the sampled route's
// crossover (kCudaMinSampledLength = 16384): shorter buckets take the
// row-local exact route, K beyond the shared output the general route, and
// sampling off keeps every short bucket exact.
TEST(CudaPlannerTest, ShortRowBucketsAroundTheCrossover) {
  auto plan = [](int32_t k, int64_t m, int64_t n, CudaSelectorConfig c = {}) {
    c.enable_short_rows = false;
    auto p = PlanCudaSelection(ProblemShape{k, m, n, Layout::kPacked}, {}, FakeH200(), c);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *p : Plan{};
  };
  for (int64_t n : {1, 4096, 8192, 16383}) {
    for (int32_t k : {1, 64, 2048, 4096}) {
      const Plan p = plan(k, 2048, n);
      EXPECT_EQ(p.route, Route::kRowLocalExact) << k << " " << n;
      EXPECT_EQ(p.sample_stride, 0);
      EXPECT_EQ(p.workspace_bytes, CudaWorkspaceBytes(CudaStagedK(k, n), p.grid));
    }
  }
  EXPECT_EQ(plan(2048, 8, 8192).grid, 8);  // no more CTAs than rows
  CudaSelectorConfig grid_override;
  grid_override.grid_override = 50;
  EXPECT_EQ(plan(2048, 4096, 8192, grid_override).grid, 50);
  EXPECT_EQ(plan(2048, 2048, 16384).route, Route::kPersistentSampled);
  EXPECT_EQ(plan(2048, 2048, 16385).route, Route::kPersistentSampled);
  EXPECT_EQ(plan(4097, 2048, 16384).route, Route::kGeneralExact);
  CudaSelectorConfig no_sampling;
  no_sampling.enable_sampling = false;
  EXPECT_EQ(plan(2048, 2048, 16384, no_sampling).route, Route::kRowLocalExact);
}

// ctas_per_sm_target = 4: the 256-thread kernel (4 CTAs/SM, grid 528) on the
// persistent routes with K <= 2048; larger K, the KV-split route and a device
// without the variant keep 512 threads.
TEST(CudaPlannerTest, SmallBlockVariantWhereItFits) {
  CudaSelectorConfig four;
  four.ctas_per_sm_target = 4;
  four.enable_short_rows = false;
  const Plan p = MustPlan(2048, 4096, 1 << 20, four);
  EXPECT_EQ(p.route, Route::kPersistentSampled);
  EXPECT_EQ(p.block, 256);
  EXPECT_EQ(p.grid, 528);
  EXPECT_EQ(MustPlan(2048, 300, 1 << 20, four).grid, 300);
  EXPECT_EQ(MustPlan(2048, 4096, 8192, four).block, 256);  // row-local exact
  EXPECT_EQ(MustPlan(4096, 4096, 1 << 20, four).block, 512);
  EXPECT_EQ(MustPlan(4096, 4096, 1 << 20, four).grid, 264);
  const Plan kv = MustPlan(2048, 8, 1 << 20, four);
  EXPECT_EQ(kv.route, Route::kKvSplitSampled);
  EXPECT_EQ(kv.block, 512);
  CudaDeviceInfo no_small = FakeH200();
  no_small.small_block_ctas_per_sm = 0;
  auto p2 =
      PlanCudaSelection(ProblemShape{2048, 4096, 1 << 20, Layout::kPitched}, {}, no_small, four);
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(p2->block, 512);
  CudaSelectorConfig bad;
  bad.ctas_per_sm_target = 3;
  EXPECT_FALSE(
      PlanCudaSelection(ProblemShape{2048, 1, 1 << 20, Layout::kPitched}, {}, FakeH200(), bad)
          .ok());
}

// ctas_per_sm_target = 0: the planner's per-shape choice (sampled route,
// K <= 2048; N_cap <= 256K, or 512K with M_cap >= 4096: bench/NOTES.md).
TEST(CudaPlannerTest, AutoVariantFollowsTheMeasuredRule) {
  CudaSelectorConfig automatic;
  automatic.ctas_per_sm_target = 0;
  struct Case {
    int64_t m, n;
    int block;
  };
  for (const Case& c : {Case{512, 131072, 256}, Case{8192, 131072, 256}, Case{512, 262144, 256},
                        Case{8192, 262144, 256}, Case{512, 524288, 512}, Case{2048, 524288, 512},
                        Case{4096, 524288, 256}, Case{8192, 524288, 256},
                        Case{8192, int64_t{1} << 20, 512}, Case{512, int64_t{1} << 20, 512}}) {
    const Plan p = MustPlan(2048, c.m, c.n, automatic);
    EXPECT_EQ(p.block, c.block) << c.m << " x " << c.n;
    EXPECT_EQ(p.grid, std::min<int64_t>(c.m, c.block == 256 ? 528 : 264)) << c.m << " x " << c.n;
  }
  // The default is the measured rule; ctas_per_sm_target = 2 keeps 512 threads.
  EXPECT_EQ(MustPlan(2048, 4096, 131072).block, 256);
  CudaSelectorConfig wide;
  wide.ctas_per_sm_target = 2;
  EXPECT_EQ(MustPlan(2048, 4096, 131072, wide).block, 512);
  EXPECT_EQ(MustPlan(4096, 4096, 131072, automatic).block, 512);
  CudaSelectorConfig automatic_persistent = automatic;  // the short-row route off
  automatic_persistent.enable_short_rows = false;
  EXPECT_EQ(MustPlan(2048, 4096, 8192, automatic_persistent).block, 512);  // exact route: default
}

// 16-bit rows also take 256 threads for M_cap >= 1024 up to 1M (measured
// 5-13 % faster there); M = 512 and wider rows keep the FP32 rule.
TEST(CudaPlannerTest, SixteenBitRowsTakeSmallBlocksForManyLongRows) {
  for (ScoreType t : {ScoreType::kBFloat16, ScoreType::kFloat16}) {
    auto block = [&](int64_t m, int64_t n) {
      auto p = PlanCudaSelection(ProblemShape{2048, m, n, Layout::kPitched, t}, {}, FakeH200(), {});
      EXPECT_TRUE(p.ok());
      return p.ok() ? p->block : 0;
    };
    EXPECT_EQ(block(1024, 524288), 256);
    EXPECT_EQ(block(8192, int64_t{1} << 20), 256);
    EXPECT_EQ(block(1024, int64_t{1} << 20), 256);
    EXPECT_EQ(block(512, int64_t{1} << 20), 512);
    EXPECT_EQ(block(512, 524288), 512);
    EXPECT_EQ(block(4096, int64_t{1} << 21), 512);
    EXPECT_EQ(block(512, 131072), 256);
  }
  auto fp32 = PlanCudaSelection(ProblemShape{2048, 8192, int64_t{1} << 20, Layout::kPitched}, {},
                                FakeH200(), {});
  ASSERT_TRUE(fp32.ok());
  EXPECT_EQ(fp32->block, 512);
}

// The certification pass's shared-memory ring: the 256-thread kernel inside
// the FP32 small-block region, from 128K on 16-bit rows and 256K on FP32
// rows; never the 512-thread kernel; admit_ring = 0 / 1 force it.
TEST(CudaPlannerTest, AdmitRingWhereItMeasuredFaster) {
  auto ring = [&](ScoreType t, int64_t m, int64_t n, int32_t block,
                  const CudaSelectorConfig& c = {}) {
    return CudaUseAdmitRing(ProblemShape{2048, m, n, Layout::kPitched, t}, block, c);
  };
  const ScoreType f32 = ScoreType::kFloat32, bf16 = ScoreType::kBFloat16;
  EXPECT_FALSE(ring(f32, 4096, 131072, 256));
  EXPECT_TRUE(ring(f32, 4096, 262144, 256));
  EXPECT_TRUE(ring(f32, 4096, 524288, 256));
  EXPECT_FALSE(ring(f32, 2048, 524288, 256));
  EXPECT_FALSE(ring(f32, 4096, 262144, 512));
  EXPECT_TRUE(ring(bf16, 512, 131072, 256));
  EXPECT_TRUE(ring(ScoreType::kFloat16, 8192, 262144, 256));
  EXPECT_FALSE(ring(bf16, 1024, 65536, 256));
  EXPECT_FALSE(ring(bf16, 2048, 524288, 256));  // 16-bit small blocks, ring off
  EXPECT_FALSE(ring(bf16, 4096, int64_t{1} << 20, 256));
  CudaSelectorConfig on, off;
  on.admit_ring = 1;
  off.admit_ring = 0;
  EXPECT_TRUE(ring(f32, 8192, int64_t{1} << 20, 512, on));
  EXPECT_FALSE(ring(bf16, 4096, 262144, 256, off));
}

TEST(CudaPlannerTest, GridIsCappedByRowsAndResidency) {
  EXPECT_EQ(MustPlan(2048, 1, 40000).grid, 1);
  EXPECT_EQ(MustPlan(2048, 263, 1 << 20).grid, 263);
  EXPECT_EQ(MustPlan(2048, 100000, 1 << 20).grid, 264);
}

TEST(CudaPlannerTest, WorkspaceDoesNotGrowWithRows) {
  const Plan a = MustPlan(2048, 1000, 1 << 20);
  const Plan b = MustPlan(2048, 1000000, 1 << 20);
  EXPECT_EQ(a.workspace_bytes, b.workspace_bytes);
  EXPECT_EQ(a.workspace_bytes, CudaWorkspaceBytes(2048, 264));
}

TEST(CudaPlannerTest, ShortRowsAndNoSamplingTakeTheExactRoute) {
  CudaSelectorConfig persistent;
  persistent.enable_short_rows = false;
  EXPECT_EQ(MustPlan(2048, 64, kCudaMinSampledLength - 1, persistent).route, Route::kRowLocalExact);
  EXPECT_EQ(MustPlan(2048, 64, kCudaMinSampledLength, persistent).route, Route::kPersistentSampled);
  CudaSelectorConfig off;
  off.enable_sampling = false;
  const Plan p = MustPlan(2048, 64, 1 << 20, off);
  EXPECT_EQ(p.route, Route::kRowLocalExact);
  EXPECT_EQ(p.sample_stride, 0);
}

// The short-row route by the measured table: one 256-thread CTA per row (or
// the grid override), the header as the whole workspace, no sampling; the
// buckets past its reach, K past the measured K, sampling off and the route
// off keep the persistent routes.
TEST(CudaPlannerTest, ShortRowRouteByTheMeasuredTable) {
  for (int32_t k : {1, 64, 512, 1024, 2048}) {
    // M_cap = 4096: the many-rows reach for 512 < K <= 2048.
    const int64_t reach =
        k <= kCudaShortRowSmallK ? kCudaShortRowReachSmallK : kCudaShortRowReachManyRows;
    EXPECT_EQ(CudaShortRowReach(k, 4096), reach);
    EXPECT_EQ(CudaShortRowReach(k, 2048),
              k <= kCudaShortRowSmallK ? kCudaShortRowReachSmallK : kCudaShortRowReach);
    for (int64_t n : {int64_t{1}, int64_t{4096}, int64_t{8192}, reach}) {
      const Plan p = MustPlan(k, 4096, n);
      EXPECT_EQ(p.route, Route::kShortRowExact) << k << " " << n;
      EXPECT_EQ(p.block, 256);
      EXPECT_EQ(p.grid, 4096);
      EXPECT_EQ(p.sample_stride, 0);
      EXPECT_EQ(p.workspace_bytes, CudaWorkspaceBytes(k, 0));  // the header alone
    }
    EXPECT_NE(MustPlan(k, 4096, reach + 1).route, Route::kShortRowExact) << k;
  }
  EXPECT_EQ(CudaShortRowReach(4096, 4096), 0);
  // 512 < K <= 2048 at 32K: the short-row route from M_cap = 4096 rows on.
  EXPECT_EQ(MustPlan(2048, 4095, 32768).route, Route::kPersistentSampled);
  EXPECT_EQ(MustPlan(2048, 8192, 32768).route, Route::kShortRowExact);
  EXPECT_EQ(MustPlan(1024, 4096, 32768).route, Route::kShortRowExact);
  EXPECT_EQ(MustPlan(2048, 8192, 32769).route, Route::kPersistentSampled);
  EXPECT_EQ(MustPlan(4096, 4096, 8192).route, Route::kRowLocalExact);
  EXPECT_EQ(MustPlan(2048, 100, 8192).grid, 100);
  CudaSelectorConfig c;
  c.grid_override = 50;
  EXPECT_EQ(MustPlan(2048, 4096, 8192, c).grid, 50);
  c = {};
  c.short_row_max_width = 65536;
  EXPECT_EQ(MustPlan(2048, 4096, 65536, c).route, Route::kShortRowExact);
  EXPECT_EQ(MustPlan(4096, 4096, 65536, c).route, Route::kShortRowExact);
  EXPECT_EQ(MustPlan(4097, 4096, 8192, c).route, Route::kGeneralExact);
  c = {};
  c.enable_short_rows = false;
  EXPECT_EQ(MustPlan(2048, 4096, 8192, c).route, Route::kRowLocalExact);
  c = {};
  c.enable_sampling = false;
  EXPECT_EQ(MustPlan(2048, 4096, 8192, c).route, Route::kRowLocalExact);
  EXPECT_NE(MustPlan(2048, 4096, 8192).Explain().find("short-row-exact"), std::string::npos);
}

// K <= 512 at N_cap = 64K: the short-row route for kCudaShortRowWideMinRows <=
// M_cap <= kCudaShortRowWideMaxRows (measured faster at 256 and 1024 rows),
// one CTA per row; fewer rows keep KV-split or the persistent kernel, more
// rows and larger K the persistent kernel; 16-bit rows plan alike.
TEST(CudaPlannerTest, ShortRowWideBucketForHundredsOfRows) {
  for (int32_t k : {1, 64, 512}) {
    for (int64_t m : {kCudaShortRowWideMinRows, int64_t{512}, kCudaShortRowWideMaxRows}) {
      EXPECT_EQ(CudaShortRowReach(k, m), kCudaShortRowReachSmallKWide) << k << " " << m;
      for (int64_t n : {int64_t{32769}, int64_t{40001}, kCudaShortRowReachSmallKWide}) {
        for (ScoreType dtype : kAllScoreTypes) {
          auto p =
              PlanCudaSelection(ProblemShape{k, m, n, Layout::kPitched, dtype}, {}, FakeH200(), {});
          ASSERT_TRUE(p.ok()) << p.status();
          EXPECT_EQ(p->route, Route::kShortRowExact) << k << " " << m << " x " << n;
          EXPECT_EQ(p->block, 256);
          EXPECT_EQ(p->grid, m);
          EXPECT_EQ(p->sample_stride, 0);
          EXPECT_EQ(p->workspace_bytes, CudaWorkspaceBytes(k, 0));  // the header alone
        }
      }
      EXPECT_EQ(MustPlan(k, m, kCudaShortRowReachSmallKWide + 1).route, Route::kPersistentSampled)
          << k << " " << m;
    }
    EXPECT_EQ(CudaShortRowReach(k, kCudaShortRowWideMinRows - 1), kCudaShortRowReachSmallK);
    EXPECT_EQ(CudaShortRowReach(k, kCudaShortRowWideMaxRows + 1), kCudaShortRowReachSmallK);
    EXPECT_EQ(MustPlan(k, kCudaShortRowWideMinRows - 1, 65536).route, Route::kPersistentSampled);
    EXPECT_EQ(MustPlan(k, 128, 65536).route, Route::kKvSplitSampled);
    EXPECT_EQ(MustPlan(k, 8, 40001).route, Route::kPersistentSampled);
    EXPECT_EQ(MustPlan(k, kCudaShortRowWideMaxRows + 1, 65536).route, Route::kPersistentSampled);
    EXPECT_EQ(MustPlan(k, 4096, 65536).route, Route::kPersistentSampled);
  }
  EXPECT_EQ(MustPlan(513, 1024, 65536).route, Route::kPersistentSampled);
  EXPECT_EQ(MustPlan(2048, 256, 40001).route, Route::kPersistentSampled);
  CudaSelectorConfig c;
  c.enable_short_rows = false;
  EXPECT_EQ(MustPlan(512, 1024, 65536, c).route, Route::kPersistentSampled);
  c = {};
  c.enable_sampling = false;
  EXPECT_EQ(MustPlan(512, 1024, 65536, c).route, Route::kRowLocalExact);
}

// The short-row kernel's variant (kShortRowSharedRow or not) keeps one CTA
// per row; anything else is refused by name.
TEST(CudaPlannerTest, ShortRowVariants) {
  CudaSelectorConfig c;
  for (int v : {0, kShortRowSharedRow}) {
    c.short_row_variant = v;
    const Plan p = MustPlan(2048, 4096, 8192, c);
    EXPECT_EQ(p.route, Route::kShortRowExact) << v;
    EXPECT_EQ(p.grid, 4096) << v;
  }
  for (int v : {-1, 2, 3, 8}) {
    c.short_row_variant = v;
    const auto p =
        PlanCudaSelection(ProblemShape{2048, 4096, 8192, Layout::kPitched}, {}, FakeH200(), c);
    ASSERT_FALSE(p.ok()) << v;
    EXPECT_NE(p.status().message().find("short_row_variant"), std::string::npos) << v;
  }
}

// kv_split_band keeps the route and adds a second buffer per row.
TEST(CudaPlannerTest, KvSplitBandAddsOneRowBufferPerRow) {
  CudaSelectorConfig c;
  c.cluster_route = -1;
  c.kv_split_band = false;
  const Plan plain = MustPlan(2048, 32, 524288, c);
  c.kv_split_band = true;
  const Plan band = MustPlan(2048, 32, 524288, c);
  ASSERT_EQ(plain.route, Route::kKvSplitSampled);
  EXPECT_EQ(band.route, Route::kKvSplitSampled);
  EXPECT_EQ(band.grid, plain.grid);
  EXPECT_EQ(band.workspace_bytes - plain.workspace_bytes, 32u * 8u * CudaKvRowEntries(2048));
}

TEST(CudaPlannerTest, LargeKTakesTheGeneralPath) {
  EXPECT_EQ(MustPlan(kCudaMaxFastK, 512, 1 << 20).route, Route::kPersistentSampled);
  const Plan p = MustPlan(kCudaMaxFastK + 1, 512, 1 << 20);
  EXPECT_EQ(p.route, Route::kGeneralExact);
  EXPECT_GT(p.workspace_bytes, MustPlan(kCudaMaxFastK, 512, 1 << 20).workspace_bytes);
}

// No row is longer than N_cap, so no row commits more than min(K, N_cap):
// the CTA slices are sized for that. K = 2^20 over rows of 1000 costs what
// K = 1000 costs; K = 2^20 over rows of 2^20 grows with K (output staging
// and sort scratch per CTA).
TEST(CudaPlannerTest, WorkspaceIsSizedForKCappedByTheRowWidth) {
  EXPECT_EQ(CudaStagedK(2048, 1000), 1000);
  EXPECT_EQ(CudaStagedK(2048, 1 << 20), 2048);
  EXPECT_EQ(CudaStagedK(kCudaMaxK, 0), 1);
  CudaSelectorConfig c;
  c.enable_short_rows = false;
  for (int32_t k : {5000, 1 << 16, kCudaMaxK}) {
    const Plan wide_k = MustPlan(k, 4096, 1000, c);
    const Plan same = MustPlan(1000, 4096, 1000, c);
    EXPECT_EQ(wide_k.route, Route::kGeneralExact) << k;
    EXPECT_EQ(wide_k.grid, same.grid) << k;
    EXPECT_EQ(wide_k.workspace_bytes, same.workspace_bytes) << k;
    EXPECT_EQ(wide_k.workspace_bytes, CudaWorkspaceBytes(1000, wide_k.grid)) << k;
  }
  // K = 2^20 over rows of 5000: slices for 5000 staged outputs (the general
  // route's staging starts above the shared output), 2^20 would be ~12 MiB
  // per CTA.
  const Plan p = MustPlan(kCudaMaxK, 16, 5000, c);
  EXPECT_EQ(p.workspace_bytes, CudaWorkspaceBytes(5000, p.grid));
  EXPECT_LT(p.workspace_bytes, CudaWorkspaceBytes(kCudaMaxK, p.grid) / 100);
  // K <= N_cap: unchanged.
  const Plan full = MustPlan(kCudaMaxK, 16, 1 << 20, c);
  EXPECT_EQ(full.workspace_bytes, CudaWorkspaceBytes(kCudaMaxK, full.grid));
}

TEST(CudaPlannerTest, FewLongRowsAreSplitWhenEnabled) {
  EXPECT_EQ(MustPlan(2048, 1, 1 << 20).route, Route::kKvSplitSampled);  // on by default
  CudaSelectorConfig split;
  split.enable_kv_split = true;
  const Plan one = MustPlan(2048, 1, 1 << 20, split);
  EXPECT_EQ(one.route, Route::kKvSplitSampled);
  EXPECT_EQ(one.split, 8);
  EXPECT_EQ(one.grid, 8);
  const Plan p64 = MustPlan(2048, 64, 1 << 20, split);
  EXPECT_EQ(p64.route, Route::kKvSplitSampled);
  EXPECT_EQ(p64.split, 4);
  EXPECT_EQ(p64.grid, 256);
  EXPECT_EQ(MustPlan(2048, 132, 1 << 20, split).split, 2);
  EXPECT_EQ(MustPlan(2048, 133, 1 << 20, split).route, Route::kPersistentSampled);
  EXPECT_EQ(MustPlan(2048, 8, kCudaKvSplitMinWidth - 1, split).route, Route::kPersistentSampled);
  CudaSelectorConfig no_split;
  no_split.enable_kv_split = false;
  EXPECT_EQ(MustPlan(2048, 8, 1 << 20, no_split).route, Route::kPersistentSampled);
}

// An H200 with thread-block clusters (the occupancy API's counts, fixed here).
CudaDeviceInfo FakeH200WithClusters() {
  CudaDeviceInfo d = FakeH200();
  d.clusters_of_8 = 14;
  d.clusters_of_16 = 7;
  d.dense_clusters_of_8 = 28;
  d.dense_clusters_of_16 = 14;
  return d;
}

absl::StatusOr<Plan> ClusterPlan(int32_t k, int64_t m, int64_t n, CudaSelectorConfig c = {}) {
  return PlanCudaSelection(ProblemShape{k, m, n, Layout::kPitched}, {}, FakeH200WithClusters(), c);
}

// The cluster route by the measured table: few rows (M_cap <= kCudaClusterMaxRows)
// of N_cap >= kCudaClusterTableMinWidth; 16 CTAs for one row of 1M, 8
// elsewhere, 1 CTA per SM; more rows keep KV-split (16 x 1M included: KV-split
// with its band kept apart measured faster than the 2-CTAs-per-SM variant). Forced on, it takes
// every sampled bucket of N_cap >= kCudaClusterMinWidth with clusters taking rows in turn; forced
// off, never; never without clusters on the device.
TEST(CudaPlannerTest, ClusterRouteByTheMeasuredTable) {
  for (int64_t m : {int64_t{1}, int64_t{2}, kCudaClusterMaxRows}) {
    for (int64_t n : {kCudaClusterTableMinWidth, int64_t{1} << 20}) {
      auto p = ClusterPlan(2048, m, n);
      ASSERT_TRUE(p.ok()) << p.status();
      EXPECT_EQ(p->route, Route::kClusterSampled) << m << " x " << n;
      const int size = m == 1 && n >= kCudaCluster16MinWidth ? 16 : 8;
      EXPECT_EQ(p->split, size) << m << " x " << n;
      EXPECT_EQ(p->ctas_per_sm, 1);
      EXPECT_EQ(p->grid, m * size);
      EXPECT_EQ(p->block, 512);
      EXPECT_EQ(p->sample_stride, 64);
      EXPECT_EQ(p->workspace_bytes, CudaWorkspaceBytes(2048, p->grid));
      EXPECT_NE(p->Explain().find("cluster-sampled"), std::string::npos);
    }
  }
  for (int64_t m : {kCudaClusterMaxRows + 1, int64_t{16}}) {
    EXPECT_EQ(ClusterPlan(2048, m, 1 << 20)->route, Route::kKvSplitSampled) << m;
  }
  // The 2-CTAs-per-SM variant by the knob alone.
  CudaSelectorConfig two_per_sm;
  two_per_sm.cluster_ctas_per_sm = 2;
  const Plan two = *ClusterPlan(2048, 4, 1 << 20, two_per_sm);
  EXPECT_EQ(two.route, Route::kClusterSampled);
  EXPECT_EQ(two.ctas_per_sm, 2);
  EXPECT_EQ(two.grid, 4 * 8);
  EXPECT_EQ(ClusterPlan(2048, 64, 1 << 20)->route, Route::kKvSplitSampled);
  EXPECT_EQ(ClusterPlan(2048, 1, kCudaClusterTableMinWidth - 1)->route, Route::kKvSplitSampled);
  EXPECT_EQ(ClusterPlan(kCudaMaxFastK + 1, 1, 1 << 20)->route, Route::kGeneralExact);
  CudaSelectorConfig exact;
  exact.enable_sampling = false;
  EXPECT_EQ(ClusterPlan(2048, 1, 1 << 20, exact)->route, Route::kRowLocalExact);
  // No clusters on the device: the table does not apply.
  EXPECT_EQ(MustPlan(2048, 1, 1 << 20).route, Route::kKvSplitSampled);

  CudaSelectorConfig on;
  on.cluster_route = 1;
  const Plan p64 = *ClusterPlan(2048, 64, 1 << 20, on);
  EXPECT_EQ(p64.route, Route::kClusterSampled);
  EXPECT_EQ(p64.split, 8);
  EXPECT_EQ(p64.grid, 14 * 8);  // resident clusters, rows in turn
  EXPECT_EQ(ClusterPlan(2048, 64, kCudaClusterMinWidth, on)->route, Route::kClusterSampled);
  EXPECT_EQ(ClusterPlan(2048, 64, kCudaClusterMinWidth - 1, on)->route, Route::kPersistentSampled);
  on.cluster_size = 16;
  on.cluster_ctas_per_sm = 2;
  const Plan dense = *ClusterPlan(2048, 64, 1 << 20, on);
  EXPECT_EQ(dense.split, 16);
  EXPECT_EQ(dense.ctas_per_sm, 2);
  EXPECT_EQ(dense.grid, 14 * 16);
  EXPECT_NE(dense.Explain().find("ctas_per_sm=2"), std::string::npos);
  CudaSelectorConfig off;
  off.cluster_route = -1;
  EXPECT_EQ(ClusterPlan(2048, 1, 1 << 20, off)->route, Route::kKvSplitSampled);
  CudaSelectorConfig bad;
  bad.cluster_size = 4;
  EXPECT_FALSE(ClusterPlan(2048, 1, 1 << 20, bad).ok());
  bad.cluster_size = 8;
  bad.cluster_ctas_per_sm = 3;
  EXPECT_FALSE(ClusterPlan(2048, 1, 1 << 20, bad).ok());
}

TEST(CudaPlannerTest, StrideOverride) {
  CudaSelectorConfig c;
  c.sample_stride = 128;
  EXPECT_EQ(MustPlan(2048, 64, 1 << 20, c).sample_stride, 128);
  c.sample_stride = 100;
  EXPECT_FALSE(
      PlanCudaSelection(ProblemShape{2048, 64, 1 << 20, Layout::kPitched}, {}, FakeH200(), c).ok());
}

TEST(CudaPlannerTest, RejectsBadShapesAndDevices) {
  const CudaDeviceInfo d = FakeH200();
  EXPECT_FALSE(PlanCudaSelection(ProblemShape{0, 1, 1, Layout::kPitched}, {}, d, {}).ok());
  EXPECT_FALSE(PlanCudaSelection(ProblemShape{1, 0, 1, Layout::kPitched}, {}, d, {}).ok());
  EXPECT_FALSE(
      PlanCudaSelection(ProblemShape{kCudaMaxK + 1, 1, 1 << 20, Layout::kPitched}, {}, d, {}).ok());
  EXPECT_FALSE(
      PlanCudaSelection(ProblemShape{16, 1, int64_t{1} << 31, Layout::kPitched}, {}, d, {}).ok());
  CudaDeviceInfo none;
  EXPECT_FALSE(PlanCudaSelection(ProblemShape{16, 1, 100, Layout::kPitched}, {}, none, {}).ok());
}

// Every score type takes the same route, grid, block, split and workspace
// as FP32 on every bucket (the routes stream any type; the workspace holds
// keys and indices, not scores), except the 256-thread variant that 16-bit
// rows also take for many long rows (CudaUseSmallBlocks); a value that is no
// ScoreType is refused.
TEST(CudaPlannerTest, SixteenBitBucketsPlanLikeFp32) {
  const CudaDeviceInfo d = FakeH200();
  const int64_t widths[] = {4096, 16384, 65536, 131072, 1 << 20};
  for (int32_t k : {64, 2048, 10000}) {
    for (int64_t rows : {1, 8, 512, 8192}) {
      for (int64_t width : widths) {
        const ProblemShape fp32{k, rows, width, Layout::kPitched};
        const absl::StatusOr<Plan> want = PlanCudaSelection(fp32, {}, d, {});
        ASSERT_TRUE(want.ok()) << want.status();
        for (ScoreType dtype : {ScoreType::kBFloat16, ScoreType::kFloat16}) {
          ProblemShape shape = fp32;
          shape.dtype = dtype;
          const absl::StatusOr<Plan> p = PlanCudaSelection(shape, {}, d, {});
          ASSERT_TRUE(p.ok()) << p.status();
          EXPECT_EQ(p->route, want->route) << p->Explain();
          EXPECT_EQ(p->split, want->split) << p->Explain();
          if (p->route == Route::kPersistentSampled && want->block == 512 &&
              rows >= kCudaSmallBlock16MinRows && width <= kCudaSmallBlock16MaxWidth && k <= 2048) {
            EXPECT_EQ(p->block, 256) << p->Explain();
            continue;
          }
          EXPECT_EQ(p->grid, want->grid) << p->Explain();
          EXPECT_EQ(p->block, want->block) << p->Explain();
          EXPECT_EQ(p->split, want->split) << p->Explain();
          EXPECT_EQ(p->workspace_bytes, want->workspace_bytes) << p->Explain();
          EXPECT_NE(p->Explain().find(std::string(ScoreTypeName(dtype))), std::string::npos);
        }
      }
    }
  }
  for (ScoreType dtype : kAllScoreTypes) EXPECT_TRUE(CheckCudaScoreType(dtype).ok());
  const absl::Status unknown = CheckCudaScoreType(static_cast<ScoreType>(7));
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("dtype"), std::string::npos) << unknown;
  EXPECT_FALSE(
      PlanCudaSelection(
          ProblemShape{2048, 64, 1 << 20, Layout::kPitched, static_cast<ScoreType>(7)}, {}, d, {})
          .ok());
}

TEST(CudaPlannerTest, ExplainNamesTheRoute) {
  const Plan p = MustPlan(2048, 512, 131072);
  EXPECT_NE(p.Explain().find("persistent-sampled"), std::string::npos);
}

// kv_split_force (A/B): every sampled bucket with N_cap >=
// kCudaKvSplitMinWidth takes the KV-split route with that split whatever
// M_cap, with a grid of M_cap x split CTAs beyond the resident ones; by
// default only few rows are split; enable_kv_split = false wins; other
// values are refused.
TEST(CudaPlannerTest, ForcedSplitBeyondTheResidentCtas) {
  for (int32_t split : {2, 4, 8}) {
    CudaSelectorConfig c;
    c.kv_split_force = split;
    for (int64_t m : {int64_t{1}, int64_t{512}, int64_t{8192}}) {
      const Plan p = MustPlan(2048, m, 1 << 17, c);
      EXPECT_EQ(p.route, Route::kKvSplitSampled) << m;
      EXPECT_EQ(p.split, split) << m;
      EXPECT_EQ(p.grid, m * split) << m;
      EXPECT_EQ(p.block, 512);
      // A slice per segment CTA and the rows' certified and band buffers.
      EXPECT_GE(p.workspace_bytes,
                CudaWorkspaceBytes(2048, p.grid) + m * 2 * 8 * CudaKvRowEntries(2048));
    }
    EXPECT_EQ(MustPlan(2048, 512, kCudaKvSplitMinWidth - 1, c).route, Route::kPersistentSampled);
  }
  for (int64_t n : {int64_t{1} << 17, int64_t{1} << 20}) {
    EXPECT_EQ(MustPlan(2048, 512, n).route, Route::kPersistentSampled) << n;
    EXPECT_EQ(MustPlan(2048, 1024, n).route, Route::kPersistentSampled) << n;
  }
  CudaSelectorConfig off;
  off.enable_kv_split = false;
  off.kv_split_force = 4;
  EXPECT_EQ(MustPlan(2048, 512, 1 << 17, off).route, Route::kPersistentSampled);
  for (int32_t bad : {-1, 1, 3, 16}) {
    CudaSelectorConfig c;
    c.kv_split_force = bad;
    EXPECT_FALSE(
        PlanCudaSelection(ProblemShape{2048, 512, 1 << 17, Layout::kPitched}, {}, FakeH200(), c)
            .ok())
        << bad;
  }
}

}  // namespace
}  // namespace topk
