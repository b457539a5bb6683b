// GPU tests of the CUDA selector: every generator x K x shapes covering the
// planner's routes, checked by the verifier and against the reference; graph
// replays with changing live M; garbage workspaces; padding; NaN and bad
// lengths; deterministic and sorted modes; the C ABI. Skips without a device.
// Every test runs on both persistent kernel variants.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "selector_fixture.h"

namespace topk::cuda_test {
namespace {

// Every generator x K, on a shape whose random lengths cover L <= K, the exact
// route (L below the sampling crossover) and the sampled route.
TEST_P(CudaSelectorTest, EveryGeneratorEveryK) {
  auto sel = Make();
  ASSERT_NE(sel, nullptr);
  for (Distribution d : testing::kAllDistributions) {
    for (int32_t k : {1, 64, 512, 2048, 4096, 10000}) {
      GeneratorSpec spec;
      spec.distribution = d;
      spec.lengths = LengthPattern::kRandom;
      spec.rows = 10;
      spec.width = k > 4096 ? 90000 : 60000;
      spec.k = k;
      spec.seed = 1000 + k;
      const ScoreMatrix m = Gen(spec);
      const std::string what =
          std::string(testing::DistributionName(d)) + " k=" + std::to_string(k);
      SelectOptions opts;
      opts.deterministic = (k % 2 == 0);  // half the cases bit-identical to the reference
      Check(*sel, m, k, opts, what);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_P(CudaSelectorTest, EdgeLengthsBothLayouts) {
  auto sel = Make();
  ASSERT_NE(sel, nullptr);
  for (Layout layout : {Layout::kPitched, Layout::kPacked}) {
    for (int32_t k : {1, 64, 2048, 4096}) {
      GeneratorSpec spec;
      spec.distribution = Distribution::kIndexer;
      spec.lengths = LengthPattern::kEdges;
      spec.layout = layout;
      spec.rows = 12;
      spec.width = 40000;
      spec.pitch = layout == Layout::kPitched ? 40003 : 0;  // unaligned row starts
      spec.k = k;
      spec.seed = 7 + k;
      spec.padding = std::numeric_limits<float>::quiet_NaN();
      Check(*sel, Gen(spec), k, {}, "edges nan-padding k=" + std::to_string(k));
      spec.padding = 1e9f;
      SelectOptions sorted;
      sorted.sorted = true;
      Check(*sel, Gen(spec), k, sorted, "edges sorted k=" + std::to_string(k));
      if (HasFatalFailure()) return;
    }
  }
}

TEST_P(CudaSelectorTest, WideRowsSampledRouteAllModes) {
  CudaSelectorConfig no_split;
  no_split.enable_kv_split = false;  // 40 rows would be split: keep the persistent kernel here
  auto sel = Make(no_split);
  ASSERT_NE(sel, nullptr);
  for (Distribution d : {Distribution::kIndexer, Distribution::kBf16Ties, Distribution::kNormal,
                         Distribution::kFp8Ties}) {
    GeneratorSpec spec;
    spec.distribution = d;
    spec.lengths = LengthPattern::kCausalTerminal;
    spec.rows = 40;
    spec.width = 300000;
    spec.seed = 99;
    const ScoreMatrix m = Gen(spec);
    for (int mode = 0; mode < 4; ++mode) {
      SelectOptions o;
      o.sorted = mode & 1;
      o.deterministic = mode & 2;
      Check(*sel, m, 2048, o,
            std::string(testing::DistributionName(d)) + " mode " + std::to_string(mode));
      if (HasFatalFailure()) return;
    }
    if (d == Distribution::kIndexer) {
      EXPECT_EQ(last_stats_.sampled, 40) << "wide indexer rows should use the view";
    }
  }
}

TEST_P(CudaSelectorTest, KvSplitAllModes) {
  // The KV-split kernel runs 512 threads whatever the persistent variant.
  if (Ctas() == 4) GTEST_SKIP() << "KV-split: one variant";
  auto sel = Make(KvSplitConfig());
  ASSERT_NE(sel, nullptr);
  for (int64_t rows : {1, 8, 64}) {
    for (Distribution d :
         {Distribution::kIndexer, Distribution::kBf16Ties, Distribution::kStridePeriodic,
          Distribution::kConstant, Distribution::kUniform}) {
      GeneratorSpec spec;
      spec.distribution = d;
      spec.lengths = rows == 8 ? LengthPattern::kEdges : LengthPattern::kCausalTerminal;
      spec.rows = rows;
      spec.width = rows == 64 ? 100000 : 300001;
      spec.layout = rows == 8 ? Layout::kPacked : Layout::kPitched;
      spec.seed = 77 + rows;
      const ScoreMatrix m = Gen(spec);
      for (int mode = 0; mode < 4; ++mode) {
        SelectOptions o;
        o.sorted = mode & 1;
        o.deterministic = mode & 2;
        std::vector<int32_t> out;
        std::vector<RowStatus> status;
        Plan plan;
        RunOn(*sel, m, 2048, o, &out, &status, &plan);
        if (HasFatalFailure()) return;
        ASSERT_EQ(plan.route, Route::kKvSplitSampled);
        const std::string what = std::string(testing::DistributionName(d)) + " rows " +
                                 std::to_string(rows) + " mode " + std::to_string(mode);
        ASSERT_OK(testing::VerifySelection(m.batch(), 2048, o, out.data(), status.data()));
        if (o.deterministic) {
          std::vector<int32_t> ref(out.size());
          ASSERT_OK(testing::ReferenceSelect(m.batch(), 2048, o, OutputView{ref.data(), nullptr}));
          ASSERT_EQ(ref, out) << what;
        }
      }
    }
  }
  // NaN in one segment of a split row.
  GeneratorSpec spec;
  spec.rows = 4;
  spec.width = 200000;
  ScoreMatrix m = Gen(spec);
  SetScore(m, 2 * m.pitch + 150000, std::numeric_limits<float>::quiet_NaN());
  std::vector<int32_t> out;
  std::vector<RowStatus> status;
  RunOn(*sel, m, 2048, {}, &out, &status);
  EXPECT_EQ(status[0], RowStatus::kOk);
  EXPECT_EQ(status[2], RowStatus::kNan);
  ASSERT_OK(testing::VerifySelection(m.batch(), 2048, {}, out.data(), status.data()));
}

TEST_P(CudaSelectorTest, KvSplitGraphReplay) {
  // The KV-split kernel runs 512 threads whatever the persistent variant.
  if (Ctas() == 4) GTEST_SKIP() << "KV-split: one variant";
  auto sel = Make(KvSplitConfig());
  ASSERT_NE(sel, nullptr);
  const int64_t cap = 8;
  auto plan = sel->MakePlan(ProblemShape{2048, cap, 150000, Layout::kPitched, Dtype()}, {});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->route, Route::kKvSplitSampled);
  auto ws = cuda::AllocateDevice<uint8_t>(plan->workspace_bytes);
  ASSERT_TRUE(ws.ok());
  ASSERT_CUDA(cudaMemset(ws->get(), 0xFF, ws->bytes()));
  // The replays run on a non-blocking stream, unordered with this memset.
  ASSERT_CUDA(cudaDeviceSynchronize());
  auto stream = cuda::CreateStream();
  ASSERT_TRUE(stream.ok());
  RunContext ctx{ws->get(), ws->bytes(), stream->get()};
  auto runner = CudaGraphRunner::Create(*sel, *plan, ctx);
  ASSERT_TRUE(runner.ok()) << runner.status();
  int seed = 0;
  for (int64_t live : {int64_t{0}, int64_t{1}, int64_t{5}, cap, cap}) {
    GeneratorSpec spec;
    spec.rows = cap;
    spec.width = 150000;
    spec.lengths = LengthPattern::kRandom;
    spec.seed = 500 + ++seed;
    const ScoreMatrix m = Gen(spec);
    auto dm = Upload(m);
    ASSERT_TRUE(dm.ok());
    RowBatch b = dm->batch;
    b.num_rows = live;
    auto dout = cuda::AllocateDevice<int32_t>(cap * 2048);
    ASSERT_TRUE(dout.ok());
    ASSERT_CUDA(cudaMemset(dout->get(), 0x7F, dout->bytes()));
    // The replays run on a non-blocking stream, unordered with this memset.
    ASSERT_CUDA(cudaDeviceSynchronize());
    ASSERT_OK((*runner)->Replay(b, OutputView{dout->get(), nullptr}));
    ASSERT_CUDA(cudaStreamSynchronize(stream->get()));
    std::vector<int32_t> out(cap * 2048);
    ASSERT_CUDA(cudaMemcpy(out.data(), dout->get(), out.size() * 4, cudaMemcpyDeviceToHost));
    RowBatch hb = m.batch();
    hb.num_rows = live;
    ASSERT_OK(testing::VerifySelection(hb, 2048, {}, out.data()));
    for (int64_t i = live * 2048; i < cap * 2048; ++i) ASSERT_EQ(out[i], 0x7F7F7F7F);
  }
}

TEST_P(CudaSelectorTest, DeterministicIsBitIdenticalAcrossRunsAndRoutes) {
  GeneratorSpec spec;
  spec.distribution = Distribution::kFp8Ties;
  spec.rows = 24;
  spec.width = 100000;
  spec.lengths = LengthPattern::kRandom;
  const ScoreMatrix m = Gen(spec);
  SelectOptions o;
  o.deterministic = true;
  auto sampled = Make();
  CudaSelectorConfig off;
  off.enable_sampling = false;
  auto exact = Make(off);
  ASSERT_TRUE(sampled && exact);
  std::vector<int32_t> a, b, c;
  std::vector<RowStatus> sa, sb, sc;
  RunOn(*sampled, m, 2048, o, &a, &sa);
  RunOn(*sampled, m, 2048, o, &b, &sb);
  RunOn(*exact, m, 2048, o, &c, &sc);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
}

TEST_P(CudaSelectorTest, NanRowsAndBadLengths) {
  auto sel = Make();
  ASSERT_NE(sel, nullptr);
  GeneratorSpec spec;
  spec.rows = 6;
  spec.width = 50000;
  ScoreMatrix m = Gen(spec);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  SetScore(m, 1 * m.pitch + 100, nan);  // row 1: sampled row
  m.lengths[2] = 1000;
  SetScore(m, 2 * m.pitch + 999, nan);    // row 2: L <= K
  SetScore(m, 3 * m.pitch + 49999, nan);  // row 3: last
  m.lengths[4] = 50001;                   // > width
  m.lengths[5] = -3;
  std::vector<int32_t> out;
  std::vector<RowStatus> status;
  RunOn(*sel, m, 2048, {}, &out, &status);
  EXPECT_EQ(status[0], RowStatus::kOk);
  EXPECT_EQ(status[1], RowStatus::kNan);
  EXPECT_EQ(status[2], RowStatus::kNan);
  EXPECT_EQ(status[3], RowStatus::kNan);
  EXPECT_EQ(status[4], RowStatus::kBadLength);
  EXPECT_EQ(status[5], RowStatus::kBadLength);
  for (int r = 1; r < 6; ++r) {
    for (int i = 0; i < 2048; ++i) ASSERT_EQ(out[r * 2048 + i], -1) << "row " << r;
  }
}

// One captured graph replayed for live M in {0, 1, grid-1, grid, grid+1, cap}
// and changed lengths and buffers; rows beyond live M stay untouched.
TEST_P(CudaSelectorTest, GraphReplayWithLiveRowsAndLengths) {
  CudaSelectorConfig persistent;  // this bucket is about the persistent grid
  persistent.enable_short_rows = false;
  auto sel = Make(persistent);
  ASSERT_NE(sel, nullptr);
  const int32_t k = 512;
  const CudaDeviceInfo& info = sel->device_info();
  const int64_t grid = int64_t{info.sm_count} *
                       (Ctas() == 4 ? info.small_block_ctas_per_sm : info.persistent_ctas_per_sm);
  const int64_t cap = grid + 40;
  auto plan = sel->MakePlan(ProblemShape{k, cap, 20000, Layout::kPitched, Dtype()}, {});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->grid, grid);
  ASSERT_EQ(plan->block, Ctas() == 4 ? 256 : 512);
  CheckGraphReplayOverLiveRows(*sel, *plan, 20000, 0);
}

// More rows than the grid, so every CTA selects several in a row (claimed
// from the device counter); random lengths put short, unsampled and empty
// rows between sampled ones, and min_sampled_length 1024 samples most of
// them. Every mode against the reference (deterministic: bit-identical).
TEST_P(CudaSelectorTest, ManyRowsPerCtaMixedLengths) {
  CudaSelectorConfig c;
  c.enable_short_rows = false;
  c.enable_kv_split = false;
  c.min_sampled_length = 1024;
  auto sel = Make(c);
  ASSERT_NE(sel, nullptr);
  const CudaDeviceInfo& info = sel->device_info();
  const int64_t grid = int64_t{info.sm_count} *
                       (Ctas() == 4 ? info.small_block_ctas_per_sm : info.persistent_ctas_per_sm);
  for (Distribution d : {Distribution::kIndexer, Distribution::kFp8Ties}) {
    GeneratorSpec spec;
    spec.distribution = d;
    spec.lengths = LengthPattern::kRandom;
    spec.rows = 2 * grid + 7;
    spec.width = 6000;
    spec.seed = 7;
    const ScoreMatrix m = Gen(spec);
    for (int mode = 0; mode < 4; ++mode) {
      SelectOptions o;
      o.sorted = mode & 1;
      o.deterministic = mode & 2;
      Check(*sel, m, 256, o,
            std::string(testing::DistributionName(d)) + " mode " + std::to_string(mode));
      if (HasFatalFailure()) return;
    }
    EXPECT_GT(last_stats_.sampled, grid) << "rows beyond the first wave should be sampled";
  }
}

// The certification pass's shared-memory ring (certification.cuh,
// AdmitRing): odd pitches put every row start off the 16-byte boundary (a
// scalar head), random lengths leave a partial last stage and a scalar tail;
// rows shorter than the ring's early stages, rows that wrap the ring many
// times, and several rows per CTA (the early stages of a row land in buffers
// the previous row refined into). Every mode against the reference.
TEST_P(CudaSelectorTest, RingPassUnalignedRowsAndRaggedStages) {
  CudaSelectorConfig c;
  c.enable_short_rows = false;
  c.enable_kv_split = false;
  c.min_sampled_length = 1024;
  c.admit_ring = 1;
  auto sel = Make(c);
  ASSERT_NE(sel, nullptr);
  const CudaDeviceInfo& info = sel->device_info();
  const int64_t grid = int64_t{info.sm_count} *
                       (Ctas() == 4 ? info.small_block_ctas_per_sm : info.persistent_ctas_per_sm);
  struct Case {
    int64_t rows, width;
    Layout layout;
  };
  for (const Case& cs :
       {Case{2 * grid + 7, 6001, Layout::kPitched}, Case{40, 70001, Layout::kPacked}}) {
    GeneratorSpec spec;
    spec.distribution = Distribution::kIndexer;
    spec.lengths = LengthPattern::kRandom;
    spec.rows = cs.rows;
    spec.width = cs.width;
    spec.layout = cs.layout;
    spec.seed = 11;
    const ScoreMatrix m = Gen(spec);
    for (int mode = 0; mode < 4; ++mode) {
      SelectOptions o;
      o.sorted = mode & 1;
      o.deterministic = mode & 2;
      Check(*sel, m, 300, o, "width " + std::to_string(cs.width) + " mode " + std::to_string(mode));
      if (HasFatalFailure()) return;
    }
    EXPECT_GT(last_stats_.sampled, cs.rows / 2) << "most rows should take the ring pass";
  }
}

TEST_P(CudaSelectorTest, CAbi) {
  const bool fp32 = Dtype() == ScoreType::kFloat32;
  topk_plan* plan = nullptr;
  // FP32 through the version 1 entry points, the 16-bit types through v2.
  ASSERT_EQ(fp32 ? topk_plan_create(0, 64, 4, 70000, TOPK_LAYOUT_PITCHED, TOPK_OPT_SORTED, &plan)
                 : topk_plan_create_v2(0, 64, 4, 70000, TOPK_LAYOUT_PITCHED,
                                       static_cast<int>(Dtype()), TOPK_OPT_SORTED, &plan),
            TOPK_OK)
      << topk_last_error();
  // 4 rows of 70000: few long rows, split over several CTAs (the route the
  // planner takes for the bucket on this device: KV-split, or the resident
  // decode route where it measured faster).
  // The C ABI's selector has the default configuration.
  auto sel = CudaSelector::Create();
  ASSERT_TRUE(sel.ok()) << sel.status();
  auto want =
      (*sel)->MakePlan(ProblemShape{64, 4, 70000, Layout::kPitched, Dtype()}, {true, false});
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_TRUE(want->route == Route::kKvSplitSampled || want->route == Route::kResidentDecode)
      << want->Explain();
  EXPECT_NE(std::string(topk_plan_explain(plan)).find(std::string(RouteName(want->route))),
            std::string::npos)
      << topk_plan_explain(plan);
  EXPECT_NE(std::string(topk_plan_explain(plan)).find(std::string(ScoreTypeName(Dtype()))),
            std::string::npos);
  GeneratorSpec spec;
  spec.rows = 4;
  spec.width = 70000;
  const ScoreMatrix m = Gen(spec);
  auto dm = Upload(m);
  ASSERT_TRUE(dm.ok());
  auto ws = cuda::AllocateDevice<uint8_t>(topk_plan_workspace_bytes(plan));
  auto dout = cuda::AllocateDevice<int32_t>(4 * 64);
  ASSERT_TRUE(ws.ok() && dout.ok());
  auto select = [&](int64_t rows) {
    return fp32 ? topk_select(plan, reinterpret_cast<const float*>(dm->scores.get()), m.pitch,
                              nullptr, dm->lengths.get(), rows, 70000, dout->get(), nullptr,
                              ws->get(), ws->bytes(), nullptr)
                : topk_select_v2(plan, dm->scores.get(), m.pitch, nullptr, dm->lengths.get(), rows,
                                 70000, dout->get(), nullptr, ws->get(), ws->bytes(), nullptr);
  };
  ASSERT_EQ(select(4), TOPK_OK) << topk_last_error();
  ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<int32_t> out(4 * 64);
  ASSERT_CUDA(cudaMemcpy(out.data(), dout->get(), out.size() * 4, cudaMemcpyDeviceToHost));
  SelectOptions sorted;
  sorted.sorted = true;
  ASSERT_OK(testing::VerifySelection(m.batch(), 64, sorted, out.data()));
  EXPECT_EQ(select(5), TOPK_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(topk_last_error()).find("max_rows"), std::string::npos);
  // A base pointer off the element grid.
  EXPECT_EQ(
      topk_select_v2(plan, dm->scores.get() + (fp32 ? 2 : 1), m.pitch, nullptr, dm->lengths.get(),
                     4, 70000, dout->get(), nullptr, ws->get(), ws->bytes(), nullptr),
      TOPK_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(topk_last_error()).find("aligned"), std::string::npos);
  topk_plan_destroy(plan);
}

// Small configuration for compute-sanitizer (memcheck, racecheck).
TEST_P(CudaSelectorTest, SanitizerSmall) {
  auto sel = Make();
  ASSERT_NE(sel, nullptr);
  for (Distribution d : {Distribution::kIndexer, Distribution::kConstant}) {
    GeneratorSpec spec;
    spec.distribution = d;
    spec.rows = 3;
    spec.width = 40000;
    spec.lengths = LengthPattern::kRandom;
    SelectOptions o;
    o.deterministic = true;
    o.sorted = true;
    Check(*sel, Gen(spec), 256, o, "sanitizer");
  }
}

// SanitizerSmall with the certification pass through the shared-memory ring
// (the sanitizer filter's small case for it: rows of up to 40000 wrap the
// ring a few times and end in a partial stage).
TEST_P(CudaSelectorTest, RingSanitizerSmall) {
  CudaSelectorConfig c;
  c.admit_ring = 1;
  auto sel = Make(c);
  ASSERT_NE(sel, nullptr);
  for (Distribution d : {Distribution::kIndexer, Distribution::kConstant}) {
    GeneratorSpec spec;
    spec.distribution = d;
    spec.rows = 3;
    spec.width = 40000;
    spec.lengths = LengthPattern::kRandom;
    SelectOptions o;
    o.deterministic = true;
    o.sorted = true;
    Check(*sel, Gen(spec), 256, o, "ring sanitizer");
  }
}

INSTANTIATE_TEST_SUITE_P(KernelVariants, CudaSelectorTest, AllVariantsAllTypes(), VariantName);

// The C ABI refuses a value that is no score type before any device work,
// so this holds on a machine without a GPU too.
TEST(CAbi, UnknownScoreTypeIsInvalidArgument) {
  topk_plan* plan = nullptr;
  EXPECT_EQ(topk_plan_create_v2(0, 64, 8, 4096, TOPK_LAYOUT_PITCHED, 3, 0, &plan),
            TOPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(plan, nullptr);
  EXPECT_NE(std::string(topk_last_error()).find("dtype"), std::string::npos) << topk_last_error();
  EXPECT_EQ(topk_api_version(), 2);
}

}  // namespace
}  // namespace topk::cuda_test
