// The CUDA planner's route choice among the short-row, KV-split and cluster
// routes (host-side, a fake device; the persistent route and the workspace
// are in cuda_planner_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cuda_planner_fake_device.h"
#include "route_policies.h"
#include "topk/cuda_selector.h"

namespace topk {
namespace {

using testing::ClusterPlan;
using testing::FakeH200;
using testing::MustPlan;

TEST(CudaPlannerTest, ShortRowsAndNoSamplingTakeTheExactRoute) {
  CudaSelectorConfig persistent = testing::Rules();
  persistent.enable_short_rows = false;
  EXPECT_EQ(MustPlan(2048, 64, topk::planner::kMinSampledLength - 1, persistent).route,
            Route::kRowLocalExact);
  EXPECT_EQ(MustPlan(2048, 64, topk::planner::kMinSampledLength, persistent).route,
            Route::kPersistentSampled);
  CudaSelectorConfig off = testing::Rules();
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
    const int64_t reach = k <= topk::planner::kShortRowReach.small_k
                              ? topk::planner::kShortRowReach.reach_small_k
                              : topk::planner::kShortRowReach.reach_many_rows;
    EXPECT_EQ(CudaShortRowReach(k, 4096), reach);
    EXPECT_EQ(CudaShortRowReach(k, 2048), k <= topk::planner::kShortRowReach.small_k
                                              ? topk::planner::kShortRowReach.reach_small_k
                                              : topk::planner::kShortRowReach.reach);
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
  CudaSelectorConfig c = testing::Rules();
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

// K <= 512 at N_cap = 64K: the short-row route for topk::planner::kShortRowReach.wide_min_rows <=
// M_cap <= topk::planner::kShortRowReach.wide_max_rows (measured faster at 256 and 1024 rows),
// one CTA per row; fewer rows keep KV-split or the persistent kernel, more
// rows and larger K the persistent kernel; 16-bit rows plan alike.
TEST(CudaPlannerTest, ShortRowWideBucketForHundredsOfRows) {
  for (int32_t k : {1, 64, 512}) {
    for (int64_t m : {topk::planner::kShortRowReach.wide_min_rows, int64_t{512},
                      topk::planner::kShortRowReach.wide_max_rows}) {
      EXPECT_EQ(CudaShortRowReach(k, m), topk::planner::kShortRowReach.reach_small_k_wide)
          << k << " " << m;
      for (int64_t n :
           {int64_t{32769}, int64_t{40001}, topk::planner::kShortRowReach.reach_small_k_wide}) {
        for (ScoreType dtype : kAllScoreTypes) {
          auto p = PlanCudaSelection(ProblemShape{k, m, n, Layout::kPitched, dtype}, {}, FakeH200(),
                                     testing::Rules());
          ASSERT_TRUE(p.ok()) << p.status();
          EXPECT_EQ(p->route, Route::kShortRowExact) << k << " " << m << " x " << n;
          EXPECT_EQ(p->block, 256);
          EXPECT_EQ(p->grid, m);
          EXPECT_EQ(p->sample_stride, 0);
          EXPECT_EQ(p->workspace_bytes, CudaWorkspaceBytes(k, 0));  // the header alone
        }
      }
      EXPECT_EQ(MustPlan(k, m, topk::planner::kShortRowReach.reach_small_k_wide + 1).route,
                Route::kPersistentSampled)
          << k << " " << m;
    }
    EXPECT_EQ(CudaShortRowReach(k, topk::planner::kShortRowReach.wide_min_rows - 1),
              topk::planner::kShortRowReach.reach_small_k);
    EXPECT_EQ(CudaShortRowReach(k, topk::planner::kShortRowReach.wide_max_rows + 1),
              topk::planner::kShortRowReach.reach_small_k);
    EXPECT_EQ(MustPlan(k, topk::planner::kShortRowReach.wide_min_rows - 1, 65536).route,
              Route::kPersistentSampled);
    EXPECT_EQ(MustPlan(k, 128, 65536).route, Route::kKvSplitSampled);
    EXPECT_EQ(MustPlan(k, 8, 40001).route, Route::kPersistentSampled);
    EXPECT_EQ(MustPlan(k, topk::planner::kShortRowReach.wide_max_rows + 1, 65536).route,
              Route::kPersistentSampled);
    EXPECT_EQ(MustPlan(k, 4096, 65536).route, Route::kPersistentSampled);
  }
  EXPECT_EQ(MustPlan(513, 1024, 65536).route, Route::kPersistentSampled);
  EXPECT_EQ(MustPlan(2048, 256, 40001).route, Route::kPersistentSampled);
  CudaSelectorConfig c = testing::Rules();
  c.enable_short_rows = false;
  EXPECT_EQ(MustPlan(512, 1024, 65536, c).route, Route::kPersistentSampled);
  c = {};
  c.enable_sampling = false;
  EXPECT_EQ(MustPlan(512, 1024, 65536, c).route, Route::kRowLocalExact);
}

// The short-row kernel's variant (kShortRowSharedRow or not) keeps one CTA
// per row; anything else is refused by name.
TEST(CudaPlannerTest, ShortRowVariants) {
  CudaSelectorConfig c = testing::Rules();
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
  CudaSelectorConfig c = testing::Rules();
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

TEST(CudaPlannerTest, FewLongRowsAreSplitWhenEnabled) {
  EXPECT_EQ(MustPlan(2048, 1, 1 << 20).route, Route::kKvSplitSampled);  // on by default
  CudaSelectorConfig split = testing::Rules();
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
  EXPECT_EQ(MustPlan(2048, 8, topk::planner::kKvSplit.min_width - 1, split).route,
            Route::kPersistentSampled);
  CudaSelectorConfig no_split = testing::Rules();
  no_split.enable_kv_split = false;
  EXPECT_EQ(MustPlan(2048, 8, 1 << 20, no_split).route, Route::kPersistentSampled);
}

// The cluster route by the measured table: few rows (M_cap <=
// topk::planner::kClusterTable.max_rows) of N_cap >= topk::planner::kClusterTable.table_min_width;
// 16 CTAs for one row of 1M, 8 elsewhere, 1 CTA per SM; more rows keep KV-split (16 x 1M included:
// KV-split with its band kept apart measured faster than the 2-CTAs-per-SM variant). Forced on, it
// takes every sampled bucket of N_cap >= topk::planner::kClusterTable.min_width with clusters
// taking rows in turn; forced off, never; never without clusters on the device.
TEST(CudaPlannerTest, ClusterRouteByTheMeasuredTable) {
  for (int64_t m : {int64_t{1}, int64_t{2}, topk::planner::kClusterTable.max_rows}) {
    for (int64_t n : {topk::planner::kClusterTable.table_min_width, int64_t{1} << 20}) {
      auto p = ClusterPlan(2048, m, n);
      ASSERT_TRUE(p.ok()) << p.status();
      EXPECT_EQ(p->route, Route::kClusterSampled) << m << " x " << n;
      const int size = m == 1 && n >= topk::planner::kClusterTable.min_width_16 ? 16 : 8;
      EXPECT_EQ(p->split, size) << m << " x " << n;
      EXPECT_EQ(p->ctas_per_sm, 1);
      EXPECT_EQ(p->grid, m * size);
      EXPECT_EQ(p->block, 512);
      // The dense stride where the rows run in few waves (kDenseSampling).
      EXPECT_EQ(p->sample_stride, n <= 131072 ? 32 : 64) << m << " x " << n;
      EXPECT_EQ(p->workspace_bytes, CudaWorkspaceBytes(2048, p->grid));
      EXPECT_NE(p->Explain().find("cluster-sampled"), std::string::npos);
    }
  }
  for (int64_t m : {topk::planner::kClusterTable.max_rows + 1, int64_t{16}}) {
    EXPECT_EQ(ClusterPlan(2048, m, 1 << 20)->route, Route::kKvSplitSampled) << m;
  }
  // The 2-CTAs-per-SM variant by the knob alone.
  CudaSelectorConfig two_per_sm = testing::Rules();
  two_per_sm.cluster_ctas_per_sm = 2;
  const Plan two = *ClusterPlan(2048, 4, 1 << 20, two_per_sm);
  EXPECT_EQ(two.route, Route::kClusterSampled);
  EXPECT_EQ(two.ctas_per_sm, 2);
  EXPECT_EQ(two.grid, 4 * 8);
  EXPECT_EQ(ClusterPlan(2048, 64, 1 << 20)->route, Route::kKvSplitSampled);
  EXPECT_EQ(ClusterPlan(2048, 1, topk::planner::kClusterTable.table_min_width - 1)->route,
            Route::kKvSplitSampled);
  EXPECT_EQ(ClusterPlan(kCudaMaxFastK + 1, 1, 1 << 20)->route, Route::kGeneralExact);
  CudaSelectorConfig exact = testing::Rules();
  exact.enable_sampling = false;
  EXPECT_EQ(ClusterPlan(2048, 1, 1 << 20, exact)->route, Route::kRowLocalExact);
  // No clusters on the device: the table does not apply.
  EXPECT_EQ(MustPlan(2048, 1, 1 << 20).route, Route::kKvSplitSampled);

  CudaSelectorConfig on = testing::Rules();
  on.cluster_route = 1;
  const Plan p64 = *ClusterPlan(2048, 64, 1 << 20, on);
  EXPECT_EQ(p64.route, Route::kClusterSampled);
  EXPECT_EQ(p64.split, 8);
  EXPECT_EQ(p64.grid, 14 * 8);  // resident clusters, rows in turn
  EXPECT_EQ(ClusterPlan(2048, 64, topk::planner::kClusterTable.min_width, on)->route,
            Route::kClusterSampled);
  EXPECT_EQ(ClusterPlan(2048, 64, topk::planner::kClusterTable.min_width - 1, on)->route,
            Route::kPersistentSampled);
  on.cluster_size = 16;
  on.cluster_ctas_per_sm = 2;
  const Plan dense = *ClusterPlan(2048, 64, 1 << 20, on);
  EXPECT_EQ(dense.split, 16);
  EXPECT_EQ(dense.ctas_per_sm, 2);
  EXPECT_EQ(dense.grid, 14 * 16);
  EXPECT_NE(dense.Explain().find("ctas_per_sm=2"), std::string::npos);
  CudaSelectorConfig off = testing::Rules();
  off.cluster_route = -1;
  EXPECT_EQ(ClusterPlan(2048, 1, 1 << 20, off)->route, Route::kKvSplitSampled);
  CudaSelectorConfig bad = testing::Rules();
  bad.cluster_size = 4;
  EXPECT_FALSE(ClusterPlan(2048, 1, 1 << 20, bad).ok());
  bad.cluster_size = 8;
  bad.cluster_ctas_per_sm = 3;
  EXPECT_FALSE(ClusterPlan(2048, 1, 1 << 20, bad).ok());
}

// kv_split_force (A/B): every sampled bucket with N_cap >=
// topk::planner::kKvSplit.min_width takes the KV-split route with that split whatever
// M_cap, with a grid of M_cap x split CTAs beyond the resident ones; by
// default only few rows are split; enable_kv_split = false wins; other
// values are refused.
TEST(CudaPlannerTest, ForcedSplitBeyondTheResidentCtas) {
  for (int32_t split : {2, 4, 8}) {
    CudaSelectorConfig c = testing::Rules();
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
    EXPECT_EQ(MustPlan(2048, 512, topk::planner::kKvSplit.min_width - 1, c).route,
              Route::kPersistentSampled);
  }
  for (int64_t n : {int64_t{1} << 17, int64_t{1} << 20}) {
    EXPECT_EQ(MustPlan(2048, 512, n).route, Route::kPersistentSampled) << n;
    EXPECT_EQ(MustPlan(2048, 1024, n).route, Route::kPersistentSampled) << n;
  }
  CudaSelectorConfig off = testing::Rules();
  off.enable_kv_split = false;
  off.kv_split_force = 4;
  EXPECT_EQ(MustPlan(2048, 512, 1 << 17, off).route, Route::kPersistentSampled);
  for (int32_t bad : {-1, 1, 3, 16}) {
    CudaSelectorConfig c = testing::Rules();
    c.kv_split_force = bad;
    EXPECT_FALSE(
        PlanCudaSelection(ProblemShape{2048, 512, 1 << 17, Layout::kPitched}, {}, FakeH200(), c)
            .ok())
        << bad;
  }
}

}  // namespace
}  // namespace topk
