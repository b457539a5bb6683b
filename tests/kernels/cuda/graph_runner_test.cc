// GPU tests of the graph runner's replay path (arguments written into the
// captured kernel node, no host wait between replays, counters kept zero by
// the kernels) and of the workspace sized for min(K, N_cap). Skips without a
// device.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "selector_fixture.h"

namespace topk::cuda_test {
namespace {

class GraphRunnerTest : public CudaSelectorTest {};

// One runner per route (persistent, KV-split, short-row) on a garbage
// workspace: 12 replays issued back to back with no host synchronisation in
// between, over 4 batches of different data, lengths and live M, each into its
// own output buffer; one wait at the end, then every answer is checked (live
// rows exact, rows past live M untouched) and the counters are zero.
TEST_P(GraphRunnerTest, ReplaysRunAheadWithoutHostSyncs) {
  struct Case {
    const char* name;
    int64_t cap, width;
    Route route;
    CudaSelectorConfig config;
  };
  CudaSelectorConfig persistent;
  persistent.enable_kv_split = false;
  persistent.enable_short_rows = false;
  std::vector<Case> cases = {{"persistent", 300, 40000, Route::kPersistentSampled, persistent},
                             {"short-row", 64, 8000, Route::kShortRowExact, {}}};
  // The KV-split kernel runs 512 threads whatever the persistent variant.
  if (Ctas() == 2)
    cases.push_back({"kv-split", 6, 100000, Route::kKvSplitSampled, KvSplitConfig()});
  const int32_t k = 512;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto sel = Make(c.config);
    ASSERT_NE(sel, nullptr);
    auto plan = sel->MakePlan(ProblemShape{k, c.cap, c.width, Layout::kPitched, Dtype()}, {});
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->route, c.route);
    auto ws = cuda::AllocateDevice<uint8_t>(plan->workspace_bytes);
    ASSERT_TRUE(ws.ok());
    ASSERT_CUDA(cudaMemset(ws->get(), 0xFF, ws->bytes()));
    ASSERT_CUDA(cudaDeviceSynchronize());
    auto stream = cuda::CreateStream();
    ASSERT_TRUE(stream.ok());
    RunContext ctx{ws->get(), ws->bytes(), stream->get()};
    auto runner = CudaGraphRunner::Create(*sel, *plan, ctx);
    ASSERT_TRUE(runner.ok()) << runner.status();
    constexpr int kBatches = 4, kReplays = 12;
    std::vector<ScoreMatrix> hosts;
    std::vector<DeviceMatrix> devs;
    const int64_t live_of[kBatches] = {c.cap, 1, c.cap / 2 + 1, 0};
    for (int i = 0; i < kBatches; ++i) {
      GeneratorSpec spec;
      spec.rows = c.cap;
      spec.width = c.width;
      spec.lengths = LengthPattern::kRandom;
      spec.seed = 900 + 17 * i;
      hosts.push_back(Gen(spec));
      auto dm = Upload(hosts.back());
      ASSERT_TRUE(dm.ok());
      devs.push_back(std::move(*dm));
    }
    std::vector<DeviceBuffer<int32_t>> outs;
    for (int i = 0; i < kReplays; ++i) {
      auto d = cuda::AllocateDevice<int32_t>(c.cap * k);
      ASSERT_TRUE(d.ok());
      ASSERT_CUDA(cudaMemset(d->get(), 0x7F, d->bytes()));
      outs.push_back(std::move(*d));
    }
    ASSERT_CUDA(cudaDeviceSynchronize());  // the memsets are unordered with the stream
    for (int i = 0; i < kReplays; ++i) {
      RowBatch b = devs[i % kBatches].batch;
      b.num_rows = live_of[i % kBatches];
      ASSERT_OK((*runner)->Replay(b, OutputView{outs[i].get(), nullptr}));
    }
    ASSERT_CUDA(cudaStreamSynchronize(stream->get()));
    for (int i = 0; i < kReplays; ++i) {
      const int64_t live = live_of[i % kBatches];
      std::vector<int32_t> out(c.cap * k);
      ASSERT_CUDA(cudaMemcpy(out.data(), outs[i].get(), out.size() * 4, cudaMemcpyDeviceToHost));
      RowBatch hb = hosts[i % kBatches].batch();
      hb.num_rows = live;
      const absl::Status v = testing::VerifySelection(hb, k, {}, out.data());
      ASSERT_TRUE(v.ok()) << "replay " << i << ": " << v;
      for (int64_t j = live * k; j < c.cap * k; ++j) {
        ASSERT_EQ(out[j], 0x7F7F7F7F) << "replay " << i << ": wrote beyond the live rows";
      }
    }
    auto counters = sel->ReadCounters(ctx);
    ASSERT_TRUE(counters.ok());
    EXPECT_EQ(counters->first, 0u);
    EXPECT_EQ(counters->second, 0u);
  }
}

// K beyond every row: the workspace is sized for min(K, N_cap), and rows
// (all of them L <= K) come back whole and padded, in every mode, through
// Run() on a garbage workspace and through a graph replay. K = 5000 and
// K = 2^20 over rows of at most 3000 (the general route, whose output would
// otherwise stage in a slice of K entries per CTA).
TEST_P(GraphRunnerTest, KBeyondEveryRowNeedsNoWorkspaceForK) {
  CudaSelectorConfig no_short;
  no_short.enable_short_rows = false;
  auto sel = Make(no_short);
  ASSERT_NE(sel, nullptr);
  GeneratorSpec spec;
  spec.rows = 3;
  spec.width = 3000;
  spec.lengths = LengthPattern::kRandom;
  const ScoreMatrix m = Gen(spec);
  for (int32_t k : {5000, kCudaMaxK}) {
    const std::string what = "k " + std::to_string(k);
    auto plan = sel->MakePlan(ProblemShape{k, m.rows, m.width, Layout::kPitched, Dtype()}, {});
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->route, Route::kGeneralExact) << what;
    EXPECT_EQ(plan->workspace_bytes, CudaWorkspaceBytes(3000, plan->grid)) << what;
    for (int mode = 0; mode < 4; ++mode) {
      SelectOptions o;
      o.sorted = mode & 1;
      o.deterministic = mode & 2;
      Check(*sel, m, k, o, what + " mode " + std::to_string(mode));
      if (HasFatalFailure()) return;
    }
  }
  // The same rows through a replay of the K = 2^20 plan.
  auto plan =
      sel->MakePlan(ProblemShape{kCudaMaxK, m.rows, m.width, Layout::kPitched, Dtype()}, {});
  ASSERT_TRUE(plan.ok());
  auto ws = cuda::AllocateDevice<uint8_t>(plan->workspace_bytes);
  auto dout = cuda::AllocateDevice<int32_t>(m.rows * int64_t{kCudaMaxK});
  auto dm = Upload(m);
  ASSERT_TRUE(ws.ok() && dout.ok() && dm.ok());
  ASSERT_CUDA(cudaMemset(ws->get(), 0xFF, ws->bytes()));
  ASSERT_CUDA(cudaDeviceSynchronize());
  auto stream = cuda::CreateStream();
  ASSERT_TRUE(stream.ok());
  RunContext ctx{ws->get(), ws->bytes(), stream->get()};
  auto runner = CudaGraphRunner::Create(*sel, *plan, ctx);
  ASSERT_TRUE(runner.ok()) << runner.status();
  ASSERT_OK((*runner)->Replay(dm->batch, OutputView{dout->get(), nullptr}));
  ASSERT_CUDA(cudaStreamSynchronize(stream->get()));
  std::vector<int32_t> out(m.rows * int64_t{kCudaMaxK});
  ASSERT_CUDA(cudaMemcpy(out.data(), dout->get(), out.size() * 4, cudaMemcpyDeviceToHost));
  ASSERT_OK(testing::VerifySelection(m.batch(), kCudaMaxK, {}, out.data()));
}

// K beyond every row with more rows than CTAs, so that every CTA (the last
// one's slice ends the workspace) stages and sorts a row: the sort must stay
// inside the slice sized for min(K, N_cap). The sanitizer step runs this
// (memcheck flags a write past the workspace).
TEST_P(GraphRunnerTest, KBeyondEveryRowOnEveryCta) {
  CudaSelectorConfig no_short;
  no_short.enable_short_rows = false;
  auto sel = Make(no_short);
  ASSERT_NE(sel, nullptr);
  constexpr int32_t k = 5000;
  auto probe = sel->MakePlan(ProblemShape{k, 1 << 12, 3000, Layout::kPitched, Dtype()}, {});
  ASSERT_TRUE(probe.ok()) << probe.status();
  GeneratorSpec spec;
  spec.rows = 2 * int64_t{probe->grid} + 1;
  spec.width = 3000;
  spec.lengths = LengthPattern::kRandom;
  const ScoreMatrix m = Gen(spec);
  for (int mode = 1; mode < 4; ++mode) {
    SelectOptions o;
    o.sorted = mode & 1;
    o.deterministic = mode & 2;
    Plan plan;
    Check(*sel, m, k, o, "rows " + std::to_string(m.rows) + " mode " + std::to_string(mode), &plan);
    if (HasFatalFailure()) return;
    EXPECT_LT(plan.grid, m.rows);
  }
}

INSTANTIATE_TEST_SUITE_P(KernelVariants, GraphRunnerTest, AllVariantsAllTypes(), VariantName);

}  // namespace
}  // namespace topk::cuda_test
