// GPU tests of the CUDA selector: every generator x K x shapes covering the
// planner's routes, checked by the verifier and against the reference; graph
// replays with changing live M; garbage workspaces; padding; NaN and bad
// lengths; deterministic and sorted modes; the C ABI. Skips without a device.
// Every test runs on both persistent kernel variants (the parameter:
// ctas_per_sm_target 2 = 512 threads x 2 CTAs/SM, 4 = 256 x 4).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "topk/contract.h"
#include "topk/cuda/resources.h"
#include "topk/cuda/status.h"
#include "topk/cuda_selector.h"
#include "topk/testing/generators.h"
#include "topk/testing/reference.h"
#include "topk/testing/verifier.h"
#include "topk/topk_c.h"

namespace topk {
namespace {

using cuda::DeviceBuffer;
using testing::Distribution;
using testing::GeneratorSpec;
using testing::LengthPattern;
using testing::ScoreMatrix;

#define ASSERT_OK(expr)                          \
  do {                                           \
    const absl::Status s_ = (expr);              \
    ASSERT_TRUE(s_.ok()) << #expr << ": " << s_; \
  } while (0)
#define ASSERT_CUDA(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

bool HaveDevice(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    *why = cudaGetErrorString(e);
    return false;
  }
  if (n == 0) {
    *why = "cudaGetDeviceCount returned 0";
    return false;
  }
  return true;
}

// A host matrix mirrored on the device.
struct DeviceMatrix {
  DeviceBuffer<float> scores;
  DeviceBuffer<int32_t> lengths;
  DeviceBuffer<int64_t> offsets;
  RowBatch batch;  // device pointers
};

absl::StatusOr<DeviceMatrix> Upload(const ScoreMatrix& m) {
  DeviceMatrix d;
  auto s = cuda::AllocateDevice<float>(m.scores.size() + 4);
  if (!s.ok()) return s.status();
  d.scores = std::move(*s);
  auto l = cuda::AllocateDevice<int32_t>(m.lengths.size() + 1);
  if (!l.ok()) return l.status();
  d.lengths = std::move(*l);
  auto o = cuda::AllocateDevice<int64_t>(m.row_offsets.size() + 1);
  if (!o.ok()) return o.status();
  d.offsets = std::move(*o);
  TOPK_CUDA_RETURN_IF_ERROR(cudaMemcpy(d.scores.get(), m.scores.data(),
                                       m.scores.size() * sizeof(float), cudaMemcpyHostToDevice));
  TOPK_CUDA_RETURN_IF_ERROR(cudaMemcpy(d.lengths.get(), m.lengths.data(),
                                       m.lengths.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  if (!m.row_offsets.empty()) {
    TOPK_CUDA_RETURN_IF_ERROR(cudaMemcpy(d.offsets.get(), m.row_offsets.data(),
                                         m.row_offsets.size() * sizeof(int64_t),
                                         cudaMemcpyHostToDevice));
  }
  d.batch = m.batch();
  d.batch.scores = d.scores.get();
  d.batch.lengths = d.lengths.get();
  d.batch.row_offsets = m.row_offsets.empty() ? nullptr : d.offsets.get();
  return d;
}

class CudaSelectorTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    std::string why;
    if (!HaveDevice(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  }

  // Runs `m` with a fresh workspace full of garbage and a poisoned output;
  // returns the host output and row statuses.
  void RunOn(CudaSelector& sel, const ScoreMatrix& m, int32_t k, const SelectOptions& opts,
             std::vector<int32_t>* out, std::vector<RowStatus>* status, Plan* plan_out = nullptr) {
    auto dm = Upload(m);
    ASSERT_TRUE(dm.ok()) << dm.status();
    auto plan =
        sel.MakePlan(ProblemShape{k, std::max<int64_t>(m.rows, 1), m.width, m.layout}, opts);
    ASSERT_TRUE(plan.ok()) << plan.status();
    if (plan_out) *plan_out = *plan;
    auto ws = cuda::AllocateDevice<uint8_t>(plan->workspace_bytes);
    ASSERT_TRUE(ws.ok()) << ws.status();
    ASSERT_CUDA(cudaMemset(ws->get(), 0xFF, ws->bytes()));
    const size_t n = static_cast<size_t>(m.rows) * k;
    auto dout = cuda::AllocateDevice<int32_t>(n + 1);
    auto dst = cuda::AllocateDevice<RowStatus>(m.rows + 1);
    ASSERT_TRUE(dout.ok() && dst.ok());
    ASSERT_CUDA(cudaMemset(dout->get(), 0x7F, dout->bytes()));
    ASSERT_CUDA(cudaMemset(dst->get(), 0x55, dst->bytes()));
    RunContext ctx{ws->get(), ws->bytes(), nullptr};
    ASSERT_OK(sel.ResetStats(ctx));
    ASSERT_OK(sel.Run(*plan, dm->batch, OutputView{dout->get(), dst->get()}, ctx));
    ASSERT_CUDA(cudaDeviceSynchronize());
    out->assign(n, 0);
    status->assign(m.rows, RowStatus::kOk);
    ASSERT_CUDA(cudaMemcpy(out->data(), dout->get(), n * sizeof(int32_t), cudaMemcpyDeviceToHost));
    ASSERT_CUDA(
        cudaMemcpy(status->data(), dst->get(), m.rows * sizeof(RowStatus), cudaMemcpyDeviceToHost));
    auto counters = sel.ReadCounters(ctx);
    ASSERT_TRUE(counters.ok());
    EXPECT_EQ(counters->first, 0u) << "row claim counter not reset";
    EXPECT_EQ(counters->second, 0u) << "finished-CTA counter not reset";
    auto stats = sel.ReadStats(ctx);
    ASSERT_TRUE(stats.ok());
    last_stats_ = *stats;
  }

  // Verifier plus, in deterministic mode, bit-identity with the reference.
  void Check(CudaSelector& sel, const ScoreMatrix& m, int32_t k, const SelectOptions& opts,
             const std::string& what) {
    std::vector<int32_t> out;
    std::vector<RowStatus> status;
    RunOn(sel, m, k, opts, &out, &status);
    if (HasFatalFailure()) return;
    const absl::Status v = testing::VerifySelection(m.batch(), k, opts, out.data(), status.data());
    ASSERT_TRUE(v.ok()) << what << ": " << v;
    if (opts.deterministic) {
      std::vector<int32_t> ref(out.size());
      std::vector<RowStatus> ref_status(m.rows);
      ASSERT_OK(
          testing::ReferenceSelect(m.batch(), k, opts, OutputView{ref.data(), ref_status.data()}));
      for (int64_t r = 0; r < m.rows; ++r) {
        if (ref_status[r] != RowStatus::kOk) continue;
        ASSERT_EQ(0, std::memcmp(ref.data() + r * k, out.data() + r * k, k * sizeof(int32_t)))
            << what << ": deterministic row " << r << " differs from the reference";
      }
    }
  }

  // The kernel variant under test is the parameter; TOPK_TEST_PREFETCH=1 runs
  // with the L2 prefetch on (off by default).
  std::unique_ptr<CudaSelector> Make(CudaSelectorConfig c = {}) {
    c.ctas_per_sm_target = GetParam();
    if (std::getenv("TOPK_TEST_PREFETCH")) c.l2_prefetch = true;
    auto s = CudaSelector::Create(c);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

  CudaRouteStats last_stats_;
};

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
      const ScoreMatrix m = testing::Generate(spec);
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
      Check(*sel, testing::Generate(spec), k, {}, "edges nan-padding k=" + std::to_string(k));
      spec.padding = 1e9f;
      SelectOptions sorted;
      sorted.sorted = true;
      Check(*sel, testing::Generate(spec), k, sorted, "edges sorted k=" + std::to_string(k));
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
    const ScoreMatrix m = testing::Generate(spec);
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

// KV-split: few long rows, 2/4/8 CTAs per row; fallbacks (short rows, L <= K,
// NaN, bad lengths, unusable views, underfill) on one CTA.
CudaSelectorConfig KvSplitConfig() {
  CudaSelectorConfig c;
  c.enable_kv_split = true;
  return c;
}

TEST_P(CudaSelectorTest, KvSplitAllModes) {
  // The KV-split kernel runs 512 threads whatever the persistent variant.
  if (GetParam() == 4) GTEST_SKIP() << "KV-split: one variant";
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
      const ScoreMatrix m = testing::Generate(spec);
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
  ScoreMatrix m = testing::Generate(spec);
  m.scores[2 * m.pitch + 150000] = std::numeric_limits<float>::quiet_NaN();
  std::vector<int32_t> out;
  std::vector<RowStatus> status;
  RunOn(*sel, m, 2048, {}, &out, &status);
  EXPECT_EQ(status[0], RowStatus::kOk);
  EXPECT_EQ(status[2], RowStatus::kNan);
  ASSERT_OK(testing::VerifySelection(m.batch(), 2048, {}, out.data(), status.data()));
}

TEST_P(CudaSelectorTest, KvSplitGraphReplay) {
  // The KV-split kernel runs 512 threads whatever the persistent variant.
  if (GetParam() == 4) GTEST_SKIP() << "KV-split: one variant";
  auto sel = Make(KvSplitConfig());
  ASSERT_NE(sel, nullptr);
  const int64_t cap = 8;
  auto plan = sel->MakePlan(ProblemShape{2048, cap, 150000, Layout::kPitched}, {});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->route, Route::kKvSplitSampled);
  auto ws = cuda::AllocateDevice<uint8_t>(plan->workspace_bytes);
  ASSERT_TRUE(ws.ok());
  ASSERT_CUDA(cudaMemset(ws->get(), 0xFF, ws->bytes()));
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
    const ScoreMatrix m = testing::Generate(spec);
    auto dm = Upload(m);
    ASSERT_TRUE(dm.ok());
    RowBatch b = dm->batch;
    b.num_rows = live;
    auto dout = cuda::AllocateDevice<int32_t>(cap * 2048);
    ASSERT_TRUE(dout.ok());
    ASSERT_CUDA(cudaMemset(dout->get(), 0x7F, dout->bytes()));
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
  const ScoreMatrix m = testing::Generate(spec);
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

// The paper's one-float view (run 1) on stride-periodic rows: the view sees a
// biased sample, so rows must go through the band or exact recovery.
TEST_P(CudaSelectorTest, StridePeriodicRowsRescueAndRecover) {
  for (int run : {1, 8}) {
    CudaSelectorConfig c;
    c.sample_run = run;
    auto sel = Make(c);
    ASSERT_NE(sel, nullptr);
    GeneratorSpec spec;
    spec.distribution = Distribution::kStridePeriodic;
    spec.rows = 64;
    spec.width = 200000;
    spec.sample_stride = 64;
    const ScoreMatrix m = testing::Generate(spec);
    Check(*sel, m, 2048, {}, "stride periodic run " + std::to_string(run));
    std::printf("run %d: sampled %lld certified %lld band %lld exact %lld rescans %lld\n", run,
                static_cast<long long>(last_stats_.sampled),
                static_cast<long long>(last_stats_.certified),
                static_cast<long long>(last_stats_.band_rescued),
                static_cast<long long>(last_stats_.exact_recovery),
                static_cast<long long>(last_stats_.rescans));
  }
}

// Constant, all -inf and one-bin rows of 1M: the frontier exceeds every store
// and refinement re-scans the row.
// Both the KV-split kernel (3 rows: the default plan) and the persistent one.
TEST_P(CudaSelectorTest, DegenerateLongRowsRescan) {
  CudaSelectorConfig no_split;
  no_split.enable_kv_split = false;
  for (bool split : {true, false}) {
    auto sel = split ? Make() : Make(no_split);
    ASSERT_NE(sel, nullptr);
    for (Distribution d :
         {Distribution::kConstant, Distribution::kAllMinusInf, Distribution::kOneBinCluster}) {
      GeneratorSpec spec;
      spec.distribution = d;
      spec.rows = 3;
      spec.width = 1 << 20;
      const ScoreMatrix m = testing::Generate(spec);
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
TEST_P(CudaSelectorTest, WarpSegmentOverflowToGlobalSlice) {
  GeneratorSpec spec;
  spec.distribution = Distribution::kIndexer;
  spec.rows = 6;
  spec.width = 262144;
  spec.seed = 4242;
  ScoreMatrix m = testing::Generate(spec);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> big(100.f, 200.f);
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t p = 0; p < m.width; ++p) {
      if (p % 2048 < 128) m.scores[r * m.pitch + p] = big(rng);
    }
  }
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
// modes, bit-identical to the reference in deterministic mode.
TEST_P(CudaSelectorTest, NarrowValueRangesShareKeyPrefixes) {
  CudaSelectorConfig no_split;
  no_split.enable_kv_split = false;
  for (int low_bits : {12, 8}) {
    GeneratorSpec spec;
    spec.rows = 8;
    spec.width = 100000;
    spec.seed = 31 + low_bits;
    ScoreMatrix m = testing::Generate(spec);
    std::mt19937 rng(low_bits);
    for (float& x : m.scores) {
      const uint32_t bits = 0x447A0000u + (rng() & ((1u << low_bits) - 1u));  // 1000.0f + ulps
      std::memcpy(&x, &bits, sizeof(x));
    }
    for (bool split : {true, false}) {
      auto sel = split ? Make() : Make(no_split);
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

TEST_P(CudaSelectorTest, NanRowsAndBadLengths) {
  auto sel = Make();
  ASSERT_NE(sel, nullptr);
  GeneratorSpec spec;
  spec.rows = 6;
  spec.width = 50000;
  ScoreMatrix m = testing::Generate(spec);
  m.scores[1 * m.pitch + 100] = std::numeric_limits<float>::quiet_NaN();  // row 1: sampled row
  m.lengths[2] = 1000;
  m.scores[2 * m.pitch + 999] = std::numeric_limits<float>::quiet_NaN();    // row 2: L <= K
  m.scores[3 * m.pitch + 49999] = std::numeric_limits<float>::quiet_NaN();  // row 3: last
  m.lengths[4] = 50001;                                                     // > width
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

// Replays one captured graph of `plan` for live M in {0, 1, grid-1, grid,
// grid+1, cap} with new lengths and buffers each time (workspace filled with
// garbage first): every live row exact, rows beyond live M untouched, and the
// row-claim counters back at zero after each replay.
void CheckGraphReplayOverLiveRows(CudaSelector& selector, const Plan& plan_ref, int64_t width,
                                  uint64_t seed_base) {
  CudaSelector* sel = &selector;
  const Plan* plan = &plan_ref;
  const int32_t k = plan->shape.k;
  const int64_t grid = plan->grid;
  const int64_t cap = plan->shape.max_rows;
  auto ws = cuda::AllocateDevice<uint8_t>(plan->workspace_bytes);
  ASSERT_TRUE(ws.ok());
  ASSERT_CUDA(cudaMemset(ws->get(), 0xFF, ws->bytes()));
  auto stream = cuda::CreateStream();
  ASSERT_TRUE(stream.ok());
  RunContext ctx{ws->get(), ws->bytes(), stream->get()};
  auto runner = CudaGraphRunner::Create(*sel, *plan, ctx);
  ASSERT_TRUE(runner.ok()) << runner.status();
  uint64_t seed = 0;
  for (int64_t live : {int64_t{0}, int64_t{1}, grid - 1, grid, grid + 1, cap}) {
    GeneratorSpec spec;
    spec.rows = cap;
    spec.width = width;
    spec.lengths = LengthPattern::kRandom;
    spec.seed = seed_base + ++seed;
    const ScoreMatrix m = testing::Generate(spec);
    auto dm = Upload(m);
    ASSERT_TRUE(dm.ok());
    RowBatch b = dm->batch;
    b.num_rows = live;
    auto dout = cuda::AllocateDevice<int32_t>(cap * k);
    ASSERT_TRUE(dout.ok());
    ASSERT_CUDA(cudaMemset(dout->get(), 0x7F, dout->bytes()));
    ASSERT_OK((*runner)->Replay(b, OutputView{dout->get(), nullptr}));
    ASSERT_CUDA(cudaStreamSynchronize(stream->get()));
    std::vector<int32_t> out(cap * k);
    ASSERT_CUDA(cudaMemcpy(out.data(), dout->get(), out.size() * 4, cudaMemcpyDeviceToHost));
    RowBatch hb = m.batch();
    hb.num_rows = live;
    ASSERT_OK(testing::VerifySelection(hb, k, {}, out.data()));
    for (int64_t i = live * k; i < cap * k; ++i) {
      ASSERT_EQ(out[i], 0x7F7F7F7F) << "live M " << live << ": wrote beyond the live rows";
    }
    auto counters = sel->ReadCounters(ctx);
    ASSERT_TRUE(counters.ok());
    EXPECT_EQ(counters->first, 0u);
    EXPECT_EQ(counters->second, 0u);
  }
}

// One captured graph replayed for live M in {0, 1, grid-1, grid, grid+1, cap}
// and changed lengths and buffers; rows beyond live M stay untouched.
TEST_P(CudaSelectorTest, GraphReplayWithLiveRowsAndLengths) {
  auto sel = Make();
  ASSERT_NE(sel, nullptr);
  const int32_t k = 512;
  const CudaDeviceInfo& info = sel->device_info();
  const int64_t grid = int64_t{info.sm_count} * (GetParam() == 4 ? info.small_block_ctas_per_sm
                                                                 : info.persistent_ctas_per_sm);
  const int64_t cap = grid + 40;
  auto plan = sel->MakePlan(ProblemShape{k, cap, 20000, Layout::kPitched}, {});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->grid, grid);
  ASSERT_EQ(plan->block, GetParam() == 4 ? 256 : 512);
  CheckGraphReplayOverLiveRows(*sel, *plan, 20000, 0);
}

TEST_P(CudaSelectorTest, CAbi) {
  topk_plan* plan = nullptr;
  ASSERT_EQ(topk_plan_create(0, 64, 4, 70000, TOPK_LAYOUT_PITCHED, TOPK_OPT_SORTED, &plan), TOPK_OK)
      << topk_last_error();
  // 4 rows of 70000: few long rows, split over several CTAs.
  EXPECT_NE(std::string(topk_plan_explain(plan)).find("kv-split-sampled"), std::string::npos);
  GeneratorSpec spec;
  spec.rows = 4;
  spec.width = 70000;
  const ScoreMatrix m = testing::Generate(spec);
  auto dm = Upload(m);
  ASSERT_TRUE(dm.ok());
  auto ws = cuda::AllocateDevice<uint8_t>(topk_plan_workspace_bytes(plan));
  auto dout = cuda::AllocateDevice<int32_t>(4 * 64);
  ASSERT_TRUE(ws.ok() && dout.ok());
  ASSERT_EQ(topk_select(plan, dm->scores.get(), m.pitch, nullptr, dm->lengths.get(), 4, 70000,
                        dout->get(), nullptr, ws->get(), ws->bytes(), nullptr),
            TOPK_OK)
      << topk_last_error();
  ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<int32_t> out(4 * 64);
  ASSERT_CUDA(cudaMemcpy(out.data(), dout->get(), out.size() * 4, cudaMemcpyDeviceToHost));
  SelectOptions sorted;
  sorted.sorted = true;
  ASSERT_OK(testing::VerifySelection(m.batch(), 64, sorted, out.data()));
  EXPECT_EQ(topk_select(plan, dm->scores.get(), m.pitch, nullptr, dm->lengths.get(), 5, 70000,
                        dout->get(), nullptr, ws->get(), ws->bytes(), nullptr),
            TOPK_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(topk_last_error()).find("max_rows"), std::string::npos);
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
    Check(*sel, testing::Generate(spec), 256, o, "sanitizer");
  }
}

// --- Short rows: the row-local exact route (N_cap below the crossover) ----

constexpr int64_t kShortT = kCudaMinSampledLength - 1;

// Rows of lengths {0, 1, K-1, K, K+1, T-1, T} (clamped, K+1 <= T) and two
// random lengths in (K, T], width T. Pitched: pitch T + 1 (every row start
// alignment). Packed: rows at offsets that leave 1..3 padding floats between
// them (any 4-byte alignment). Every float beyond a row's L holds `padding`.
ScoreMatrix ShortRows(Distribution d, int32_t k, Layout layout, float padding, uint64_t seed) {
  std::vector<int64_t> lens = {0, 1, k - 1, k, k + 1, kShortT - 1, kShortT};
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 2; ++i) lens.push_back(k + 1 + static_cast<int64_t>(rng() % (kShortT - k)));
  ScoreMatrix m;
  m.layout = layout;
  m.rows = static_cast<int64_t>(lens.size());
  m.width = kShortT;
  std::vector<int64_t> starts;
  if (layout == Layout::kPitched) {
    m.pitch = kShortT + 1;
    for (int64_t r = 0; r < m.rows; ++r) starts.push_back(r * m.pitch);
    m.scores.assign(m.rows * m.pitch, padding);
  } else {
    int64_t off = 0;
    for (int64_t r = 0; r < m.rows; ++r) {
      starts.push_back(off);
      off += std::max<int64_t>(lens[r], 0) + 1 + r % 3;
    }
    m.row_offsets = starts;
    m.scores.assign(off, padding);
  }
  for (int64_t r = 0; r < m.rows; ++r) {
    const int64_t L = std::clamp<int64_t>(lens[r], 0, kShortT);
    m.lengths.push_back(static_cast<int32_t>(L));
    testing::FillRow(d, seed, r, m.scores.data() + starts[r], L);
  }
  return m;
}

// Every generator x K x layout x mode on the short-row bucket (every row on
// the row-local exact route), padding NaN / 1e9, verifier + reference; both
// kernel variants.
class ShortRowTest : public CudaSelectorTest {};

TEST_P(ShortRowTest, EveryGeneratorEveryKBothLayoutsAllModes) {
  auto sel = Make();
  ASSERT_NE(sel, nullptr);
  uint64_t seed = 1;
  for (Distribution d : testing::kAllDistributions) {
    for (int32_t k : {1, 64, 512, 2048, 4096}) {
      for (Layout layout : {Layout::kPitched, Layout::kPacked}) {
        for (int mode = 0; mode < 4; ++mode) {
          const float padding = (mode & 1) ? std::numeric_limits<float>::quiet_NaN() : 1e9f;
          const ScoreMatrix m = ShortRows(d, k, layout, padding, ++seed);
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
  auto sel = Make();
  ASSERT_NE(sel, nullptr);
  const int32_t k = 512;
  ScoreMatrix m = ShortRows(Distribution::kIndexer, k, Layout::kPitched, 1e9f, 3);
  // Rows: 0..8 lengths {0, 1, k-1, k, k+1, T-1, T, rand, rand}.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  m.scores[2 * m.pitch + k - 2] = nan;         // L <= K row
  m.scores[4 * m.pitch + 0] = nan;             // first value (head scalar or body)
  m.scores[5 * m.pitch + kShortT - 2] = nan;   // last value of L = T-1 (tail)
  m.scores[6 * m.pitch + 7000] = nan;          // body
  m.scores[7 * m.pitch + m.lengths[7]] = nan;  // just beyond L: ignored
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
  RowBatch one = m.batch();
  one.num_rows = 1;
  one.scores = m.scores.data() + 7 * m.pitch;
  one.lengths = m.lengths.data() + 7;
  ASSERT_OK(testing::VerifySelection(one, k, {}, out.data() + 7 * k, status.data() + 7));
}

// One captured graph replayed for live M in {0, 1, grid-1, grid, grid+1,
// cap} with new lengths and buffers; rows beyond live M stay untouched.
TEST_P(ShortRowTest, GraphReplayWithLiveRows) {
  auto sel = Make();
  ASSERT_NE(sel, nullptr);
  const int32_t k = 2048;
  const CudaDeviceInfo& info = sel->device_info();
  const int64_t grid = int64_t{info.sm_count} * (GetParam() == 4 ? info.small_block_ctas_per_sm
                                                                 : info.persistent_ctas_per_sm);
  const int64_t cap = grid + 40;
  auto plan = sel->MakePlan(ProblemShape{k, cap, kShortT, Layout::kPitched}, {});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->route, Route::kRowLocalExact);
  ASSERT_EQ(plan->grid, grid);
  CheckGraphReplayOverLiveRows(*sel, *plan, kShortT, 900);
}

// Small configuration for compute-sanitizer (memcheck, racecheck).
TEST_P(ShortRowTest, SanitizerSmall) {
  auto sel = Make();
  ASSERT_NE(sel, nullptr);
  for (Distribution d : {Distribution::kIndexer, Distribution::kConstant, Distribution::kFp8Ties}) {
    for (Layout layout : {Layout::kPitched, Layout::kPacked}) {
      SelectOptions o;
      o.deterministic = true;
      o.sorted = d != Distribution::kFp8Ties;
      Check(*sel, ShortRows(d, 256, layout, std::numeric_limits<float>::quiet_NaN(), 11), 256, o,
            "short-row sanitizer");
      if (HasFatalFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KernelVariants, ShortRowTest, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 4 ? std::string("Cta4x256") : "Cta2x512";
                         });

INSTANTIATE_TEST_SUITE_P(KernelVariants, CudaSelectorTest, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 4 ? std::string("Cta4x256") : "Cta2x512";
                         });

}  // namespace
}  // namespace topk
