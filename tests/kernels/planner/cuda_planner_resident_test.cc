// The CUDA planner's resident decode route (host-side, a fake device): its
// measured cells, its cluster size (what the width needs, widened by the SMs the
// bucket's rows leave), its CTA size, the header-only workspace, the forced and
// switched-off settings, and configurations that force another route.
#include <gtest/gtest.h>

#include "cuda_planner_fake_device.h"
#include "route_policies.h"
#include "topk/cuda_selector.h"

namespace topk {
namespace {

using topk::planner::kResident;
using topk::planner::kResidentMinWidth;

CudaDeviceInfo ResidentH200() {
  CudaDeviceInfo d = testing::FakeH200WithClusters();
  // The occupancy API's counts on the H200 (one CTA per SM; a cluster fits
  // one GPC).
  const int clusters[5] = {132, 66, 32, 16, 7};
  for (int i = 0; i < 5; ++i) d.resident_clusters[i] = clusters[i];
  return d;
}

Plan MustPlanOn(const CudaDeviceInfo& d, int32_t k, int64_t m, int64_t n,
                CudaSelectorConfig c = {}) {
  auto p = PlanCudaSelection(ProblemShape{k, m, n, Layout::kPitched}, {}, d, c);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Plan{};
}

// The cells measured faster (route_policies.h): K <= 1024 with 1-64 rows up
// to 64K or 1-8 up to 256K; 1024 < K <= 2048 with 1-256 rows up to 32K, 1-32
// up to 128K or 1-8 up to 256K.
TEST(CudaPlannerResidentTest, MeasuredCellsTakeTheRoute) {
  const CudaDeviceInfo d = ResidentH200();
  struct Cell {
    int32_t k;
    int64_t m, n;
  };
  for (const Cell c :
       {Cell{512, 1, 65536}, Cell{512, 8, kResidentMinWidth}, Cell{1024, 8, 65536},
        Cell{64, 1, 32768}, Cell{2048, 1, 32768}, Cell{2048, 64, 32768}, Cell{1500, 33, 20000},
        Cell{2048, 1, 131072}, Cell{2048, 8, 131072}, Cell{1025, 8, 65536}, Cell{2048, 128, 32768},
        Cell{1024, 64, 65536}, Cell{512, 8, 262144}, Cell{2048, 8, 262144}, Cell{2048, 256, 32768},
        Cell{2048, 32, 131072}, Cell{2048, 9, 131072}, Cell{2048, 20, 65536}}) {
    const int32_t k = c.k;
    const int64_t m = c.m, n = c.n;
    const Plan p = MustPlanOn(d, k, m, n);
    EXPECT_EQ(p.route, Route::kResidentDecode) << k << " " << m << " x " << n;
    EXPECT_EQ(p.grid, m * p.split);
    EXPECT_EQ(p.block, CudaResidentThreads(p.shape, p.split, {}));
    EXPECT_EQ(p.sample_stride, 0);
    EXPECT_EQ(p.workspace_bytes, CudaWorkspaceBytes(k, 0));  // the header alone
    EXPECT_NE(p.why.find("resident"), std::string::npos) << p.why;
    // Every rank's slice holds its part of the widest row.
    EXPECT_LE(CudaResidentSliceKeys(n, p.split), kResident.max_slice_keys);
  }
}

TEST(CudaPlannerResidentTest, ClusterSizeByWidthAndRows) {
  const CudaDeviceInfo d = ResidentH200();
  // The largest cluster whose M_cap clusters are resident at once: one row
  // over 16 CTAs, 8 rows over 8 each (7 clusters of 16 fit), 32 over 4.
  CudaSelectorConfig all;
  all.resident_route = 1;  // the size rule on every bucket, not only the cells
  EXPECT_EQ(MustPlanOn(d, 2048, 1, 131072, all).split, 16);
  EXPECT_EQ(MustPlanOn(d, 2048, 7, 131072, all).split, 16);
  EXPECT_EQ(MustPlanOn(d, 2048, 8, 131072, all).split, 8);
  EXPECT_EQ(MustPlanOn(d, 2048, 16, 131072, all).split, 8);
  EXPECT_EQ(MustPlanOn(d, 2048, 32, 131072, all).split, 4);
  EXPECT_EQ(MustPlanOn(d, 2048, 64, 32768, all).split, 2);
  // Past one wave: the size the width needs (32K keys a rank), the most rows
  // in flight.
  EXPECT_EQ(MustPlanOn(d, 2048, 64, 131072, all).split, 4);
  EXPECT_EQ(MustPlanOn(d, 512, 64, 262144, all).split, 8);
  // A requested size below what the width needs is raised to it.
  CudaSelectorConfig c = all;
  c.resident_cluster_size = 1;
  EXPECT_EQ(MustPlanOn(d, 2048, 1, 131072, c).split, 4);
  c.resident_cluster_size = 8;
  EXPECT_EQ(MustPlanOn(d, 2048, 1, 131072, c).split, 8);
}

// 512 threads for few rows of narrow slices; 1024 from wide_min_rows rows
// or full slices (kResident); a forced size wins, others are refused.
TEST(CudaPlannerResidentTest, CtaSizeByRowsAndSlice) {
  const CudaDeviceInfo d = ResidentH200();
  EXPECT_EQ(MustPlanOn(d, 2048, 1, 32768).block, kResident.threads);   // 2K a rank
  EXPECT_EQ(MustPlanOn(d, 2048, 8, 32768).block, kResident.threads);   // 4K a rank
  EXPECT_EQ(MustPlanOn(d, 2048, 1, 131072).block, kResident.threads);  // 8K a rank
  EXPECT_EQ(MustPlanOn(d, 2048, 8, 131072).block, kResident.threads);  // 16K a rank
  EXPECT_EQ(MustPlanOn(d, 2048, 31, 32768).block, kResident.threads);
  EXPECT_EQ(MustPlanOn(d, 2048, 32, 32768).block, kResident.wide_threads);  // the band
  EXPECT_EQ(MustPlanOn(d, 2048, 128, 32768).block, kResident.wide_threads);
  EXPECT_EQ(MustPlanOn(d, 1024, 64, 65536).block, kResident.wide_threads);
  EXPECT_EQ(MustPlanOn(d, 512, 8, 262144).block, kResident.wide_threads);  // 32K a rank
  static_assert(kResident.wide_min_rows == 32 && kResident.wide_min_slice_keys == 32768,
                "the cases above straddle the policy's thresholds");
  CudaSelectorConfig c;
  c.resident_threads = kResident.wide_threads;
  EXPECT_EQ(MustPlanOn(d, 2048, 1, 32768, c).block, kResident.wide_threads);
  c.resident_threads = kResident.threads;
  EXPECT_EQ(MustPlanOn(d, 2048, 128, 32768, c).block, kResident.threads);
  c.resident_threads = 256;
  EXPECT_FALSE(PlanCudaSelection(ProblemShape{2048, 1, 32768, Layout::kPitched}, {}, d, c).ok());
}

TEST(CudaPlannerResidentTest, OutsideTheCellsOtherRoutes) {
  const CudaDeviceInfo d = ResidentH200();
  struct Cell {
    int32_t k;
    int64_t m, n;
  };
  // Measured slower or no faster: 64 rows of 128K at K = 2048, 128 rows of
  // 64K and 32 of 256K at K <= 1024; past every cell: 257 rows of 32K, 33 of
  // 128K and 9 of 256K at K = 2048, 65 of 64K and 9 of 256K at K = 512, K
  // past 2048, rows below 16K and past the slices.
  for (const Cell c :
       {Cell{2048, 64, 131072}, Cell{1024, 128, 65536}, Cell{512, 32, 262144},
        Cell{2048, 257, 32768}, Cell{2048, 33, 131072}, Cell{2048, 9, 262144}, Cell{512, 65, 65536},
        Cell{512, 9, 262144}, Cell{4096, 1, 32768}, Cell{8192, 8, 131072},
        Cell{2048, 8, kResidentMinWidth - 1}, Cell{2048, 8, int64_t{1} << 20}}) {
    EXPECT_NE(MustPlanOn(d, c.k, c.m, c.n).route, Route::kResidentDecode)
        << c.k << " " << c.m << " x " << c.n;
  }
  // No clusters for it (before sm_90): never.
  EXPECT_NE(MustPlanOn(testing::FakeH200WithClusters(), 2048, 1, 131072).route,
            Route::kResidentDecode);
  // Switched off, or another route forced: the planner's previous choice.
  CudaSelectorConfig off;
  off.resident_route = -1;
  EXPECT_NE(MustPlanOn(d, 2048, 8, 131072, off).route, Route::kResidentDecode);
  CudaSelectorConfig forced_cluster;
  forced_cluster.cluster_route = 1;
  EXPECT_EQ(MustPlanOn(d, 2048, 1, 131072, forced_cluster).route, Route::kClusterSampled);
  CudaSelectorConfig stride;
  stride.sample_stride = 64;
  EXPECT_NE(MustPlanOn(d, 2048, 1, 131072, stride).route, Route::kResidentDecode);
  CudaSelectorConfig exact;
  exact.enable_sampling = false;
  EXPECT_EQ(MustPlanOn(d, 2048, 1, 131072, exact).route, Route::kRowLocalExact);
}

TEST(CudaPlannerResidentTest, ForcedEverywhereItServes) {
  const CudaDeviceInfo d = ResidentH200();
  CudaSelectorConfig c;
  c.resident_route = 1;
  EXPECT_EQ(MustPlanOn(d, 2048, 512, 131072, c).route, Route::kResidentDecode);
  EXPECT_EQ(MustPlanOn(d, 2048, 4, 8192, c).route, Route::kResidentDecode);
  const int64_t widest = int64_t{kResident.max_cluster} * kResident.max_slice_keys;
  EXPECT_EQ(MustPlanOn(d, 2048, 2, widest, c).split, kResident.max_cluster);
  EXPECT_NE(MustPlanOn(d, 2048, 2, widest + 1, c).route, Route::kResidentDecode);
  c.resident_cluster_size = 3;
  EXPECT_FALSE(PlanCudaSelection(ProblemShape{2048, 1, 131072, Layout::kPitched}, {}, d, c).ok());
}

}  // namespace
}  // namespace topk
