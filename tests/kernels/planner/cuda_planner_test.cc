// The CUDA planner is a pure host function: tested with a fake device.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "cuda_planner_fake_device.h"
#include "route_policies.h"
#include "topk/cuda_selector.h"

namespace topk {
namespace {

using testing::FakeH200;
using testing::MustPlan;

TEST(CudaPlannerTest, WideRowsTakeThePersistentSampledKernel) {
  const Plan p = MustPlan(2048, 4096, 1 << 20);
  EXPECT_EQ(p.route, Route::kPersistentSampled);
  EXPECT_EQ(p.sample_stride, 64);
  EXPECT_EQ(p.block, 512);
  EXPECT_EQ(p.grid, 264);
}

// With the short-row route off: short rows around the sampled route's
// crossover (topk::planner::kMinSampledLength = 16384): shorter buckets take the
// row-local exact route, K beyond the shared output the general route, and
// sampling off keeps every short bucket exact.
TEST(CudaPlannerTest, ShortRowBucketsAroundTheCrossover) {
  auto plan = [](int32_t k, int64_t m, int64_t n, CudaSelectorConfig c = testing::Rules()) {
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
  CudaSelectorConfig grid_override = testing::Rules();
  grid_override.grid_override = 50;
  EXPECT_EQ(plan(2048, 4096, 8192, grid_override).grid, 50);
  EXPECT_EQ(plan(2048, 2048, 16384).route, Route::kPersistentSampled);
  EXPECT_EQ(plan(2048, 2048, 16385).route, Route::kPersistentSampled);
  EXPECT_EQ(plan(4097, 2048, 16384).route, Route::kGeneralExact);
  CudaSelectorConfig no_sampling = testing::Rules();
  no_sampling.enable_sampling = false;
  EXPECT_EQ(plan(2048, 2048, 16384, no_sampling).route, Route::kRowLocalExact);
}

// ctas_per_sm_target = 4: the 256-thread kernel (4 CTAs/SM, grid 528) on the
// persistent routes with K <= 2048; larger K, the KV-split route and a device
// without the variant keep 512 threads.
TEST(CudaPlannerTest, SmallBlockVariantWhereItFits) {
  CudaSelectorConfig four = testing::Rules();
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
  CudaSelectorConfig bad = testing::Rules();
  bad.ctas_per_sm_target = 3;
  EXPECT_FALSE(
      PlanCudaSelection(ProblemShape{2048, 1, 1 << 20, Layout::kPitched}, {}, FakeH200(), bad)
          .ok());
}

// ctas_per_sm_target = 0: the planner's per-shape choice (sampled route,
// K <= 2048; N_cap <= 256K, or 512K with M_cap >= 4096: bench/NOTES.md).
TEST(CudaPlannerTest, AutoVariantFollowsTheMeasuredRule) {
  CudaSelectorConfig automatic = testing::Rules();
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
  CudaSelectorConfig wide = testing::Rules();
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
      auto p = PlanCudaSelection(ProblemShape{2048, m, n, Layout::kPitched, t}, {}, FakeH200(),
                                 testing::Rules());
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
                                FakeH200(), testing::Rules());
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
  CudaSelectorConfig c = testing::Rules();
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

TEST(CudaPlannerTest, StrideOverride) {
  CudaSelectorConfig c = testing::Rules();
  c.sample_stride = 128;
  EXPECT_EQ(MustPlan(2048, 64, 1 << 20, c).sample_stride, 128);
  c.sample_stride = 100;
  EXPECT_FALSE(
      PlanCudaSelection(ProblemShape{2048, 64, 1 << 20, Layout::kPitched}, {}, FakeH200(), c).ok());
}

// The planner's own stride: 32 in the measured cells where rows run in a few
// waves (kDenseSampling), 64 elsewhere, above K = 2048 and on the short-row
// route (which does not sample: 0); a configured stride wins everywhere; the
// plan says why.
TEST(CudaPlannerTest, DenseStrideWhereRowsRunInFewWaves) {
  struct Case {
    int32_t k;
    int64_t m, n;
    int32_t stride;
  };
  for (const Case& c :
       {Case{2048, 2048, 131072, 32}, Case{512, 4096, 65536, 32}, Case{2048, 512, 262144, 32},
        Case{512, 8, 262144, 32}, Case{2048, 4096, 131072, 64}, Case{2048, 1024, 262144, 64},
        Case{2048, 512, 524288, 64}, Case{4096, 64, 65536, 64}, Case{2048, 8192, 65536, 64}}) {
    for (const CudaSelectorConfig& config : {testing::Rules(), CudaSelectorConfig{}}) {
      const Plan p = MustPlan(c.k, c.m, c.n, config);
      const std::string where = absl::StrCat(c.k, ": ", c.m, " x ", c.n, " ", p.Explain());
      ASSERT_NE(p.sample_stride, 0) << where;
      EXPECT_EQ(p.sample_stride, c.stride) << where;
      EXPECT_EQ(p.why.find("stride 32") != std::string::npos, c.stride == 32) << where;
    }
    CudaSelectorConfig pinned = testing::Rules();
    pinned.sample_stride = 64;
    EXPECT_EQ(MustPlan(c.k, c.m, c.n, pinned).sample_stride, 64);
  }
  CudaSelectorConfig short_rows = testing::Rules();
  short_rows.short_row_max_width = 65536;
  EXPECT_EQ(MustPlan(2048, 4096, 32768, short_rows).sample_stride, 0);
  CudaSelectorConfig dense = testing::Rules();
  dense.sample_stride = 32;
  EXPECT_EQ(MustPlan(2048, 64, 1 << 20, dense).sample_stride, 32);
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
              rows >= topk::planner::kSmallBlockRegion.min_rows_16 &&
              width <= topk::planner::kSmallBlockRegion.max_width_16 && k <= 2048) {
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

}  // namespace
}  // namespace topk
