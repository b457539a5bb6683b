// GPU tests of the resident decode route (Route::kResidentDecode: one
// thread-block cluster per row, each rank holding its segment in shared
// memory, the exact coarse histogram all-reduced, the admitted set gathered
// into rank 0, which refines): every generator, K, layout and mode with
// ragged lengths (0, 1, K-1, K, K+1, width); K-th boundaries inside one coarse
// bin (gathered and re-scanned frontiers); infinity floods, NaN and bad
// lengths; speculative-decoding rows; rows of one slice (the lone rank) and
// its ranked bins; degenerate rows at the route's widest
// bucket; clusters taking several rows in turn; graph replays; a small case
// for the sanitizers. Every test asserts the route, cluster size and CTA size
// in the plan and the rows the clusters served (kernel counters), on FP32,
// BF16 and FP16 rows, with both CTA sizes; skips without a device or without
// the route's clusters.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "route_policies.h"
#include "route_test_rows.h"
#include "selector_fixture.h"
#include "topk/keys.h"

namespace topk::cuda_test {
namespace {

// The parameter's first element picks a variant: the requested cluster size
// (the plan takes at least what the width needs) and the CTA's threads.
struct ResidentVariant {
  int ranks;
  int threads;
};
constexpr ResidentVariant kResidentVariants[] = {
    {1, topk::planner::kResident.threads},      {4, topk::planner::kResident.threads},
    {16, topk::planner::kResident.threads},     {1, topk::planner::kResident.wide_threads},
    {4, topk::planner::kResident.wide_threads}, {16, topk::planner::kResident.wide_threads}};

class ResidentRouteTest : public CudaSelectorTest {
 protected:
  static const ResidentVariant& Variant(int i) { return kResidentVariants[i]; }
  int Requested() const { return Variant(std::get<0>(GetParam())).ranks; }
  int Threads() const { return Variant(std::get<0>(GetParam())).threads; }
  static int Needed(int64_t width) {
    int need = 1;
    while (int64_t{need} * topk::planner::kResident.max_slice_keys < width) need <<= 1;
    return need;
  }

  std::unique_ptr<CudaSelector> MakeResident(CudaSelectorConfig c = {}) {
    c.resident_route = 1;
    c.resident_cluster_size = Requested();
    c.resident_threads = Threads();
    auto s = CudaSelector::Create(c);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok() || (*s)->device_info().resident_clusters[4] <= 0) return nullptr;
    return std::move(*s);
  }

  // Runs m on the route; every row against the verifier and the reference
  // (bit-identical where the answer is unique); the route and its cluster
  // size in the plan; the rows the clusters served (L > K, no NaN, a valid
  // length) in the kernel's counters.
  void CheckRoute(CudaSelector& sel, const ScoreMatrix& m, int32_t k, const SelectOptions& o,
                  const std::string& what) {
    std::vector<int32_t> out;
    std::vector<RowStatus> status;
    Plan plan;
    RunOn(sel, m, k, o, &out, &status, &plan);
    if (HasFatalFailure()) return;
    ASSERT_EQ(plan.route, Route::kResidentDecode) << what;
    ASSERT_EQ(plan.split, std::max(Requested(), Needed(m.width))) << what;
    ASSERT_EQ(plan.block, Threads()) << what;
    ExpectReferenceAnswer(m, k, o, out, status, what);
    if (HasFatalFailure()) return;
    int64_t served = 0;
    for (int64_t r = 0; r < m.rows; ++r) {
      served += status[r] == RowStatus::kOk && m.lengths[r] > k ? 1 : 0;
    }
    ASSERT_EQ(last_stats_.resident_rows, served) << what;
  }
};

#define MAKE_RESIDENT_OR_SKIP(sel, ...) \
  auto sel = MakeResident(__VA_ARGS__); \
  if (HasFailure()) return;             \
  if (sel == nullptr) GTEST_SKIP() << "no clusters for the resident route"

// Rows of 70001 (segments end off the 16-byte grid) with the edge lengths
// {0, 1, K-1, K, K+1, width} and full rows.
TEST_P(ResidentRouteTest, EveryGeneratorEveryKBothLayoutsAllModes) {
  MAKE_RESIDENT_OR_SKIP(sel);
  ForEachEdgeLengthCase(900, [&](const GeneratorSpec& spec, int32_t k, const SelectOptions& o,
                                 const std::string& what) {
    CheckRoute(*sel, Gen(spec), k, o, what);
    return !HasFatalFailure();
  });
}

// BoundaryInOneBinRows: in_bin 5000: the bin is the frontier, gathered into
// rank 0; 30000: it exceeds rank 0's store and the ranks split it on chip
// (rows whose 16-bit rounding leaves the K-th value's digit too large are
// re-scanned).
TEST_P(ResidentRouteTest, BoundaryInsideOneCoarseBin) {
  MAKE_RESIDENT_OR_SKIP(sel);
  for (int in_bin : {5000, 30000}) {
    const ScoreMatrix m = Typed(BoundaryInOneBinRows(in_bin, 131072));
    for (int mode = 0; mode < 4; ++mode) {
      SelectOptions o;
      o.sorted = mode & 1;
      o.deterministic = mode & 2;
      for (int32_t k : {1000, 2048, 4096}) {
        CheckRoute(*sel, m, k, o,
                   "bin of " + std::to_string(in_bin) + " k=" + std::to_string(k) + " mode " +
                       std::to_string(mode));
        if (HasFatalFailure()) return;
      }
      if (in_bin > static_cast<int>(topk::planner::kResident.frontier_a)) {
        // The split ran: the frontier is one digit of the bin, not the bin.
        EXPECT_LT(last_stats_.candidates, m.rows * in_bin) << "the bin was not split";
        if (Dtype() == ScoreType::kFloat32) {
          EXPECT_EQ(last_stats_.rescans, 0);
        }
      }
    }
  }
}

// +inf and -inf floods, an all -inf row, NaN in one rank's segment, NaN in
// an L <= K row, a NaN just beyond L (ignored); then two bad lengths.
TEST_P(ResidentRouteTest, InfinityFloodsNanAndBadLengths) {
  MAKE_RESIDENT_OR_SKIP(sel);
  ScoreMatrix m = FloodAndNanRows(100000, 13);
  m = Typed(std::move(m));
  for (int mode = 0; mode < 4; ++mode) {
    SelectOptions o;
    o.sorted = mode & 1;
    o.deterministic = mode & 2;
    CheckRoute(*sel, m, 2048, o, "floods mode " + std::to_string(mode));
    if (HasFatalFailure()) return;
  }
  SetBadLengths(m);
  std::vector<int32_t> out;
  std::vector<RowStatus> status;
  RunOn(*sel, m, 2048, {}, &out, &status);
  ExpectEachRow(m, 2048, kFloodAndNanStatuses, out, status);
  if (HasFatalFailure()) return;
  EXPECT_EQ(last_stats_.resident_rows, 5);  // rows 0-3 and 6
}

// Speculative decoding: 3 consecutive rows per request whose lengths end at
// L - 2, L - 1, L (12 requests of 128K-wide causal rows), K = 512 and 2048.
TEST_P(ResidentRouteTest, SpeculativeRows) {
  MAKE_RESIDENT_OR_SKIP(sel);
  GeneratorSpec spec;
  spec.distribution = Distribution::kIndexer;
  spec.rows = 36;
  spec.width = 131072;
  spec.seed = 41;
  ScoreMatrix m = Gen(spec);
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int32_t> len(20000, 131072);
  for (int64_t q = 0; q < 12; ++q) {
    const int32_t last = len(rng);
    for (int64_t j = 0; j < 3; ++j) m.lengths[3 * q + j] = last - 2 + static_cast<int32_t>(j);
  }
  for (int32_t k : {512, 2048}) {
    CheckRoute(*sel, m, k, {}, "speculative k=" + std::to_string(k));
    if (HasFatalFailure()) return;
  }
}

// Small enough for the sanitizers: one row each of the paths (a gathered
// frontier, a gathered one-bin frontier, a re-scanned one-bin frontier, NaN,
// L <= K, a row narrower than the sampled routes take), K = 512.
TEST_P(ResidentRouteTest, SanitizerSmallRows) {
  MAKE_RESIDENT_OR_SKIP(sel);
  constexpr int64_t kWidth = 20000;
  GeneratorSpec spec;
  spec.distribution = Distribution::kIndexer;
  spec.rows = 6;
  spec.width = kWidth;
  ScoreMatrix m = testing::Generate(spec);  // FP32, edited, then typed
  for (int64_t i = 0; i < kWidth; ++i) {
    m.scores[1 * kWidth + i] = i < 1500 ? FloatsAbove(0.7f, i) : -2.f;  // one bin, gathered
    m.scores[2 * kWidth + i] = 0.7f;                                    // one bin, re-scanned
  }
  m.scores[3 * kWidth + 12345] = std::numeric_limits<float>::quiet_NaN();
  m.lengths[4] = 400;
  m.lengths[5] = 9000;
  m = Typed(std::move(m));
  for (int mode = 0; mode < 4; ++mode) {
    SelectOptions o;
    o.sorted = mode & 1;
    o.deterministic = mode & 2;
    CheckRoute(*sel, m, 512, o, "small mode " + std::to_string(mode));
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(last_stats_.rescans, 0) << "the re-scanned frontier did not run";
}

// Rows that fit one rank's slice (Ranks1: with 1024 threads the lone rank,
// with no exchange and the CTA's own barriers; with 512 a cluster of one CTA
// that still exchanges): 300 ragged rows, more than the clusters
// resident at once, packed (segments off the 16-byte grid) and pitched; then
// boundary bins of 100 and 400 entries, ranked a warp an entry (a lone rank's
// warps take several each).
TEST_P(ResidentRouteTest, RowsOfOneSlice) {
  MAKE_RESIDENT_OR_SKIP(sel);
  constexpr int64_t kWidth = 30001;
  for (Layout layout : {Layout::kPacked, Layout::kPitched}) {
    GeneratorSpec spec;
    spec.distribution = Distribution::kIndexer;
    spec.rows = 300;
    spec.width = kWidth;
    spec.layout = layout;
    spec.lengths = LengthPattern::kRandom;
    spec.seed = layout == Layout::kPacked ? 71 : 72;
    const ScoreMatrix m = Gen(spec);
    for (int mode : {0, 2}) {
      SelectOptions o;
      o.deterministic = mode & 2;
      CheckRoute(*sel, m, 2048, o,
                 std::string(layout == Layout::kPacked ? "packed" : "pitched") + " mode " +
                     std::to_string(mode));
      if (HasFatalFailure()) return;
    }
  }
  for (int in_bin : {100, 400}) {
    const ScoreMatrix m = Typed(BoundaryInOneBinRows(in_bin, kWidth));
    for (int mode : {0, 2}) {
      SelectOptions o;
      o.deterministic = mode & 2;
      CheckRoute(*sel, m, 300 + in_bin / 2, o,
                 "bin of " + std::to_string(in_bin) + " mode " + std::to_string(mode));
      if (HasFatalFailure()) return;
    }
    if (Dtype() == ScoreType::kFloat32) {  // rounded to 16 bits, values cross the bin's edges
      EXPECT_EQ(last_stats_.candidates, m.rows * in_bin) << "the bin was not the ranked one";
    }
  }
}

// Constant, all -inf and one-bin rows of the route's widest bucket: the
// boundary bin holds the row. Constant and all -inf rows stay one value
// after the on-chip split, so refinement re-scans the row's band.
TEST_P(ResidentRouteTest, DegenerateWidestRows) {
  MAKE_RESIDENT_OR_SKIP(sel);
  for (Distribution d :
       {Distribution::kConstant, Distribution::kAllMinusInf, Distribution::kOneBinCluster}) {
    GeneratorSpec spec;
    spec.distribution = d;
    spec.rows = 2;
    spec.width =
        int64_t{topk::planner::kResident.max_cluster} * topk::planner::kResident.max_slice_keys;
    const ScoreMatrix m = Gen(spec);
    SelectOptions o;
    o.deterministic = true;
    const std::string what = std::string(testing::DistributionName(d)) + " det";
    CheckRoute(*sel, m, 2048, o, what);
    if (HasFatalFailure()) return;
    if (d != Distribution::kOneBinCluster) {
      EXPECT_GT(last_stats_.rescans, 0) << what;
    }
  }
}

// One captured graph replayed for live M in {0, 1, 19, 20, 21, 40} (a
// cluster per row, more rows than clusters fit at once) with new lengths
// and buffers each time.
TEST_P(ResidentRouteTest, GraphReplayWithLiveRows) {
  MAKE_RESIDENT_OR_SKIP(sel);
  const int64_t cap = 40;
  auto plan = sel->MakePlan(ProblemShape{2048, cap, 65536, Layout::kPitched, Dtype()}, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->route, Route::kResidentDecode);
  ASSERT_EQ(plan->grid, cap * plan->split);
  CheckGraphReplayOverLiveRows(*sel, *plan, 65536, 2600, cap / 2);
}

std::string ResidentName(const ::testing::TestParamInfo<SelectorParam>& info) {
  const ResidentVariant& v = kResidentVariants[std::get<0>(info.param)];
  return "Ranks" + std::to_string(v.ranks) + "_Threads" + std::to_string(v.threads) + "_" +
         std::string(ScoreTypeName(std::get<1>(info.param)));
}

// 1, 4 and 16 CTAs per cluster (the plan raises it to what the width
// needs), each with both CTA sizes, every score type.
INSTANTIATE_TEST_SUITE_P(
    ResidentVariants, ResidentRouteTest,
    ::testing::Combine(::testing::Range(0, static_cast<int>(std::size(kResidentVariants))),
                       ::testing::ValuesIn(kAllScoreTypes)),
    ResidentName);

}  // namespace
}  // namespace topk::cuda_test
