// GPU tests of the wave-breaking split (CudaSelectorConfig::kv_split_force):
// more rows than the KV-split route's resident CTAs can hold at once, so the
// segment CTAs run in several waves of the hardware scheduler, with random
// lengths (rows at or below K, rows below the sampling crossover and long
// rows: the one-CTA fallbacks and the split beside each other), exact in every
// mode; and the diagnostic row trace (row_trace) on both sampled routes, whose
// stamps must follow the phases in order. Skips without a device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernel_args.h"
#include "selector_fixture.h"
#include "topk/cuda/resources.h"

namespace topk::cuda_test {
namespace {

class WaveSplitTest : public CudaSelectorTest {};

// 2, 4 and 8 CTAs per row over 300 rows: 600-2400 segment CTAs against 264
// resident KV-split CTAs on an H200.
TEST_P(WaveSplitTest, MoreSegmentsThanResidentCtas) {
  if (Ctas() == 4) GTEST_SKIP() << "KV-split: one variant";
  GeneratorSpec spec;
  spec.distribution = Distribution::kIndexer;
  spec.lengths = LengthPattern::kRandom;
  spec.rows = 300;
  spec.width = 65536;
  spec.seed = 4242;
  const ScoreMatrix m = Gen(spec);
  for (int32_t split : {2, 4, 8}) {
    CudaSelectorConfig c = KvSplitConfig();
    c.kv_split_force = split;
    auto sel = Make(c);
    ASSERT_NE(sel, nullptr);
    for (int mode = 0; mode < 4; ++mode) {
      if (split != 2 && mode != 3) continue;  // every mode once, the other splits deterministic
      SelectOptions o;
      o.sorted = mode & 1;
      o.deterministic = mode & 2;
      Plan plan;
      Check(*sel, m, 2048, o, "split " + std::to_string(split) + " mode " + std::to_string(mode),
            &plan);
      if (HasFatalFailure()) return;
      ASSERT_EQ(plan.route, Route::kKvSplitSampled);
      ASSERT_EQ(plan.split, split);
      ASSERT_EQ(plan.grid, spec.rows * split);
      EXPECT_GT(last_stats_.sampled, 100) << "the long rows should take the split";
    }
  }
}

// The row trace on the persistent route (this variant) and the KV-split route:
// every row stamped with a start and an end after it (and on one CTA, the
// row's cycles), the words between left zero; the answers exact.
TEST_P(WaveSplitTest, RowTraceStampsStartAndEnd) {
  GeneratorSpec spec;
  spec.distribution = Distribution::kIndexer;
  spec.lengths = LengthPattern::kCausalTerminal;
  spec.rows = 6;
  spec.width = 65536;
  spec.seed = 31;
  const ScoreMatrix m = Gen(spec);
  for (int32_t split : {0, 4}) {
    if (split > 0 && Ctas() == 4) continue;  // KV-split: one variant
    auto words = cuda::AllocateDevice<unsigned long long>(spec.rows * cuda::kTraceWords);
    ASSERT_TRUE(words.ok());
    ASSERT_CUDA(cudaMemset(words->get(), 0, words->bytes()));
    CudaSelectorConfig c = KvSplitConfig();
    c.enable_kv_split = split > 0;
    c.kv_split_force = split;
    c.row_trace = words->get();
    auto sel = Make(c);
    ASSERT_NE(sel, nullptr);
    Plan plan;
    SelectOptions o;
    o.deterministic = true;
    Check(*sel, m, 2048, o, "trace split " + std::to_string(split), &plan);
    if (HasFatalFailure()) return;
    ASSERT_EQ(plan.route, split > 0 ? Route::kKvSplitSampled : Route::kPersistentSampled);
    std::vector<unsigned long long> host(spec.rows * cuda::kTraceWords);
    ASSERT_CUDA(cudaMemcpy(host.data(), words->get(), words->bytes(), cudaMemcpyDeviceToHost));
    for (int64_t r = 0; r < spec.rows; ++r) {
      const unsigned long long* w = &host[r * cuda::kTraceWords];
      const std::string what = "split " + std::to_string(split) + " row " + std::to_string(r);
      ASSERT_NE(w[cuda::kTraceStart], 0u) << what;
      EXPECT_LT(w[cuda::kTraceStart], w[cuda::kTraceFinalize]) << what;
      EXPECT_EQ(w[cuda::kTraceProposal] | w[cuda::kTraceAdmit] | w[cuda::kTraceRefine], 0u) << what;
      EXPECT_LT(w[cuda::kTraceSm], 1024u) << what;
      if (split == 0) EXPECT_GT(w[cuda::kTraceCycles], 0u) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KernelVariants, WaveSplitTest, AllVariantsAllTypes(), VariantName);

}  // namespace
}  // namespace topk::cuda_test
