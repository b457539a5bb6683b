// The fixture every CUDA selector suite shares: device detection (suites skip
// without a device), uploads of generated matrices, one run on a garbage
// workspace with the row counters and route statistics read back, and the
// graph-replay checker. The parameter is the persistent kernel variant
// (ctas_per_sm_target 2 = 512 threads x 2 CTAs/SM, 4 = 256 x 4) and the score
// type of the rows (FP32, BF16, FP16): every suite runs on all three.
#pragma once

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
#include <tuple>
#include <vector>

#include "topk/contract.h"
#include "topk/cuda/resources.h"
#include "topk/cuda/status.h"
#include "topk/cuda_selector.h"
#include "topk/testing/generators.h"
#include "topk/testing/reference.h"
#include "topk/testing/score_types.h"
#include "topk/testing/verifier.h"
#include "topk/topk_c.h"

namespace topk::cuda_test {

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

inline bool HaveDevice(std::string* why) {
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

// A host matrix (of any score type) mirrored on the device.
struct DeviceMatrix {
  DeviceBuffer<uint8_t> scores;
  DeviceBuffer<int32_t> lengths;
  DeviceBuffer<int64_t> offsets;
  RowBatch batch;  // device pointers
};

inline absl::StatusOr<DeviceMatrix> Upload(const ScoreMatrix& m) {
  DeviceMatrix d;
  const bool wide = m.dtype == ScoreType::kFloat32;
  const size_t bytes = wide ? m.scores.size() * sizeof(float) : m.scores16.size() * 2;
  auto s = cuda::AllocateDevice<uint8_t>(bytes + 16);
  if (!s.ok()) return s.status();
  d.scores = std::move(*s);
  auto l = cuda::AllocateDevice<int32_t>(m.lengths.size() + 1);
  if (!l.ok()) return l.status();
  d.lengths = std::move(*l);
  auto o = cuda::AllocateDevice<int64_t>(m.row_offsets.size() + 1);
  if (!o.ok()) return o.status();
  d.offsets = std::move(*o);
  const void* host = wide ? static_cast<const void*>(m.scores.data())
                          : static_cast<const void*>(m.scores16.data());
  TOPK_CUDA_RETURN_IF_ERROR(cudaMemcpy(d.scores.get(), host, bytes, cudaMemcpyHostToDevice));
  TOPK_CUDA_RETURN_IF_ERROR(cudaMemcpy(d.lengths.get(), m.lengths.data(),
                                       m.lengths.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  if (!m.row_offsets.empty()) {
    TOPK_CUDA_RETURN_IF_ERROR(cudaMemcpy(d.offsets.get(), m.row_offsets.data(),
                                         m.row_offsets.size() * sizeof(int64_t),
                                         cudaMemcpyHostToDevice));
  }
  d.batch = m.batch();
  if (wide) {
    d.batch.scores = reinterpret_cast<const float*>(d.scores.get());
  } else {
    d.batch.scores16 = reinterpret_cast<const uint16_t*>(d.scores.get());
  }
  d.batch.lengths = d.lengths.get();
  d.batch.row_offsets = m.row_offsets.empty() ? nullptr : d.offsets.get();
  return d;
}

// Writes the FP32 value x at element pos of m, rounded to m's type.
inline void SetScore(ScoreMatrix& m, int64_t pos, float x) {
  if (m.dtype == ScoreType::kFloat32) {
    m.scores[pos] = x;
  } else {
    m.scores16[pos] = testing::NarrowScore(x, m.dtype);
  }
}

// Row r of m alone, as a one-row batch.
inline RowBatch OneRow(const ScoreMatrix& m, int64_t r) {
  RowBatch one = m.batch();
  one.num_rows = 1;
  one.layout = Layout::kPitched;
  one.row_offsets = nullptr;
  one.pitch = m.width;
  if (m.dtype == ScoreType::kFloat32) {
    one.scores = m.batch().row(r);
  } else {
    one.scores16 = m.batch().row16(r);
  }
  one.lengths = m.lengths.data() + r;
  return one;
}

// (persistent kernel variant: ctas_per_sm_target, score type).
using SelectorParam = std::tuple<int, ScoreType>;

class CudaSelectorTest : public ::testing::TestWithParam<SelectorParam> {
 protected:
  void SetUp() override {
    std::string why;
    if (!HaveDevice(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  }

  int Ctas() const { return std::get<0>(GetParam()); }
  ScoreType Dtype() const { return std::get<1>(GetParam()); }
  // A generated matrix of the test's score type.
  ScoreMatrix Gen(GeneratorSpec spec) const {
    spec.dtype = Dtype();
    return testing::Generate(spec);
  }
  // A hand-built or edited FP32 matrix rounded to the test's score type.
  ScoreMatrix Typed(ScoreMatrix m, bool keep_subnormals = false) const {
    return testing::NarrowTo(std::move(m), Dtype(), keep_subnormals);
  }

  // Runs `m` with a fresh workspace full of garbage and a poisoned output;
  // returns the host output and row statuses.
  void RunOn(CudaSelector& sel, const ScoreMatrix& m, int32_t k, const SelectOptions& opts,
             std::vector<int32_t>* out, std::vector<RowStatus>* status, Plan* plan_out = nullptr) {
    auto dm = Upload(m);
    ASSERT_TRUE(dm.ok()) << dm.status();
    auto plan = sel.MakePlan(
        ProblemShape{k, std::max<int64_t>(m.rows, 1), m.width, m.layout, m.dtype}, opts);
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
  // plan_out: the plan the run used.
  void Check(CudaSelector& sel, const ScoreMatrix& m, int32_t k, const SelectOptions& opts,
             const std::string& what, Plan* plan_out = nullptr) {
    std::vector<int32_t> out;
    std::vector<RowStatus> status;
    RunOn(sel, m, k, opts, &out, &status, plan_out);
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
    c.ctas_per_sm_target = Ctas();
    if (std::getenv("TOPK_TEST_PREFETCH")) c.l2_prefetch = true;
    auto s = CudaSelector::Create(c);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

  CudaRouteStats last_stats_;
};

// Every generator x K, on a shape whose random lengths cover L <= K, the exact
// route (L below the sampling crossover) and the sampled route.

// KV-split: few long rows, 2/4/8 CTAs per row; fallbacks (short rows, L <= K,
// NaN, bad lengths, unusable views, underfill) on one CTA. The cluster route,
// which takes the fewest rows by default, is off here.
inline CudaSelectorConfig KvSplitConfig() {
  CudaSelectorConfig c;
  c.enable_kv_split = true;
  c.cluster_route = -1;
  c.resident_route = -1;
  return c;
}

// Replays one captured graph of `plan` for live M in {0, 1, grid-1, grid,
// grid+1, cap} with new lengths and buffers each time (workspace filled with
// garbage first): every live row exact, rows beyond live M untouched, and the
// row-claim counters back at zero after each replay. grid_rows: the rows one
// wave of the grid takes (default: the grid, a row per CTA at most).
inline void CheckGraphReplayOverLiveRows(CudaSelector& selector, const Plan& plan_ref,
                                         int64_t width, uint64_t seed_base, int64_t grid_rows = 0) {
  CudaSelector* sel = &selector;
  const Plan* plan = &plan_ref;
  const int32_t k = plan->shape.k;
  const int64_t grid = grid_rows > 0 ? grid_rows : plan->grid;
  const int64_t cap = plan->shape.max_rows;
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
  uint64_t seed = 0;
  for (int64_t live : {int64_t{0}, int64_t{1}, grid - 1, grid, grid + 1, cap}) {
    GeneratorSpec spec;
    spec.rows = cap;
    spec.width = width;
    spec.lengths = LengthPattern::kRandom;
    spec.seed = seed_base + ++seed;
    spec.dtype = plan->shape.dtype;
    const ScoreMatrix m = testing::Generate(spec);
    auto dm = Upload(m);
    ASSERT_TRUE(dm.ok());
    RowBatch b = dm->batch;
    b.num_rows = live;
    auto dout = cuda::AllocateDevice<int32_t>(cap * k);
    ASSERT_TRUE(dout.ok());
    ASSERT_CUDA(cudaMemset(dout->get(), 0x7F, dout->bytes()));
    // The replays run on a non-blocking stream, unordered with this memset.
    ASSERT_CUDA(cudaDeviceSynchronize());
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

inline std::string VariantName(const ::testing::TestParamInfo<SelectorParam>& info) {
  return std::string(std::get<0>(info.param) == 4 ? "Cta4x256_" : "Cta2x512_") +
         std::string(ScoreTypeName(std::get<1>(info.param)));
}

// Both persistent kernel variants on every score type.
inline auto AllVariantsAllTypes() {
  return ::testing::Combine(::testing::Values(2, 4), ::testing::ValuesIn(kAllScoreTypes));
}

}  // namespace topk::cuda_test
