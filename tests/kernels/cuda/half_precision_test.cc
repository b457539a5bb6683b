// GPU tests that only 16-bit rows have: rows holding every non-NaN pattern of
// the type (both zeros, both infinities, every subnormal, every coarse bin
// boundary) through every route of the planner, checked by the verifier and,
// in deterministic mode, bit-identical to the reference on the FP32-widened
// rows; and every NaN pattern of the type reported per row. Skips without a
// device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "selector_fixture.h"
#include "topk/keys.h"

namespace topk::cuda_test {
namespace {

class HalfPrecisionTest : public CudaSelectorTest {
 protected:
  static bool IsNan16(uint16_t h, ScoreType t) {
    return t == ScoreType::kBFloat16 ? IsBf16Nan(h) : IsFp16Nan(h);
  }

  // `rows` rows, each every non-NaN pattern of the type once, shuffled per
  // row, with `copies` - 1 extra copies of a random pattern set (ties), at
  // odd element offsets (packed: row starts on every 2-byte alignment).
  ScoreMatrix EveryPatternRows(int64_t rows, int copies, uint64_t seed) const {
    std::vector<uint16_t> patterns;
    for (uint32_t h = 0; h < 65536; ++h) {
      if (!IsNan16(static_cast<uint16_t>(h), Dtype())) patterns.push_back(static_cast<uint16_t>(h));
    }
    std::mt19937_64 rng(seed);
    const int64_t base = static_cast<int64_t>(patterns.size());
    for (int c = 1; c < copies; ++c) {
      for (int64_t i = 0; i < base; i += 3) patterns.push_back(patterns[rng() % base]);
    }
    ScoreMatrix m;
    m.dtype = Dtype();
    m.layout = Layout::kPacked;
    m.rows = rows;
    m.width = static_cast<int64_t>(patterns.size());
    int64_t offset = 0;
    for (int64_t r = 0; r < rows; ++r) {
      m.row_offsets.push_back(offset);
      m.lengths.push_back(static_cast<int32_t>(m.width - (r % 3) * 1000));
      offset += m.width + r % 8;  // 0..7 elements of padding: every 2-byte alignment
    }
    m.scores16.assign(offset, 0x7FFFu);  // NaN padding: never read
    for (int64_t r = 0; r < rows; ++r) {
      std::shuffle(patterns.begin(), patterns.end(), rng);
      std::copy(patterns.begin(), patterns.begin() + m.lengths[r],
                m.scores16.begin() + m.row_offsets[r]);
    }
    return m;
  }
};

// Every non-NaN pattern through the short-row route (forced), the row-local
// exact route (sampling off), the persistent sampled route, the KV-split
// route (4 rows), the cluster route (forced, 4 rows; on devices with
// clusters) and the general route (K > 4096), all modes.
TEST_P(HalfPrecisionTest, EveryPatternEveryRoute) {
  CudaSelectorConfig short_rows;
  short_rows.short_row_max_width = 1 << 20;
  CudaSelectorConfig exact;
  exact.enable_sampling = false;
  CudaSelectorConfig no_split;
  no_split.enable_kv_split = false;
  CudaSelectorConfig cluster;
  cluster.cluster_route = 1;
  CudaSelectorConfig resident;
  resident.resident_route = 1;
  struct Case {
    const char* name;
    CudaSelectorConfig config;
    int64_t rows;
    Route route;
  };
  const Case cases[] = {{"short-row", short_rows, 6, Route::kShortRowExact},
                        {"row-local exact", exact, 6, Route::kRowLocalExact},
                        {"persistent sampled", no_split, 6, Route::kPersistentSampled},
                        {"kv-split", KvSplitConfig(), 4, Route::kKvSplitSampled},
                        {"cluster", cluster, 4, Route::kClusterSampled},
                        {"resident", resident, 4, Route::kResidentDecode}};
  for (const Case& c : cases) {
    auto sel = Make(c.config);
    ASSERT_NE(sel, nullptr);
    if (c.route == Route::kClusterSampled && sel->device_info().clusters_of_8 == 0) continue;
    if (c.route == Route::kResidentDecode && sel->device_info().resident_clusters[4] <= 0) continue;
    const ScoreMatrix m = EveryPatternRows(c.rows, c.rows == 4 ? 2 : 1, 11);
    for (int32_t k : {1, 100, 2048, 4096}) {
      for (int mode : {0, 3}) {
        SelectOptions o;
        o.sorted = mode & 1;
        o.deterministic = mode & 2;
        Plan plan;
        const std::string what =
            std::string(c.name) + " k=" + std::to_string(k) + " mode " + std::to_string(mode);
        Check(*sel, m, k, o, what, &plan);
        if (HasFatalFailure()) return;
        ASSERT_EQ(plan.route, c.route) << what;
        EXPECT_EQ(last_stats_.rows, c.rows) << what;
      }
    }
  }
  // The general route: K above the shared-memory output staging.
  auto sel = Make();
  ASSERT_NE(sel, nullptr);
  const ScoreMatrix m = EveryPatternRows(3, 1, 12);
  SelectOptions det;
  det.deterministic = true;
  Plan plan;
  Check(*sel, m, 10000, det, "general k=10000", &plan);
  EXPECT_EQ(plan.route, Route::kGeneralExact);
}

// Every NaN pattern of the type (both signs, next to the infinities) in the
// valid prefix marks its row kNan; beyond L it is ignored.
TEST_P(HalfPrecisionTest, EveryNanPatternIsReported) {
  std::vector<uint16_t> nans;
  for (uint32_t h = 0; h < 65536; ++h) {
    if (IsNan16(static_cast<uint16_t>(h), Dtype())) nans.push_back(static_cast<uint16_t>(h));
  }
  GeneratorSpec spec;
  spec.rows = 64;
  spec.width = 20000;
  ScoreMatrix m = Gen(spec);
  std::mt19937_64 rng(3);
  std::vector<RowStatus> want(m.rows, RowStatus::kNan);
  for (int64_t r = 0; r < m.rows; ++r) {
    // Rows 0 and 1: a NaN just beyond L (ignored), the others one in [0, L).
    const int64_t L = m.width - 10;
    m.lengths[r] = static_cast<int32_t>(L);
    const int64_t pos = r < 2 ? L : static_cast<int64_t>(rng() % L);
    m.scores16[r * m.pitch + pos] = nans[(r * 37) % nans.size()];
    if (r < 2) want[r] = RowStatus::kOk;
  }
  for (bool short_rows : {true, false}) {
    CudaSelectorConfig c;
    if (short_rows) c.short_row_max_width = 1 << 20;
    c.enable_short_rows = short_rows;
    auto sel = Make(c);
    ASSERT_NE(sel, nullptr);
    std::vector<int32_t> out;
    std::vector<RowStatus> status;
    RunOn(*sel, m, 512, {}, &out, &status);
    if (HasFatalFailure()) return;
    EXPECT_EQ(status, want) << (short_rows ? "short-row route" : "persistent route");
    ASSERT_OK(testing::VerifySelection(m.batch(), 512, {}, out.data(), status.data()));
  }
}

// A 16-bit plan runs only batches of its type, on the element grid: a batch
// of another type, the FP32 pointer, or an odd base address are refused
// before any launch, naming the field.
TEST_P(HalfPrecisionTest, BatchMustMatchThePlansType) {
  auto sel = Make();
  ASSERT_NE(sel, nullptr);
  GeneratorSpec spec;
  spec.rows = 2;
  spec.width = 30000;
  const ScoreMatrix m = Gen(spec);
  auto dm = Upload(m);
  ASSERT_TRUE(dm.ok());
  auto plan = sel->MakePlan(ProblemShape{64, 2, 30000, Layout::kPitched, Dtype()}, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto ws = cuda::AllocateDevice<uint8_t>(plan->workspace_bytes);
  auto out = cuda::AllocateDevice<int32_t>(2 * 64);
  ASSERT_TRUE(ws.ok() && out.ok());
  const RunContext ctx{ws->get(), ws->bytes(), nullptr};
  const OutputView view{out->get(), nullptr};
  auto expect_refused = [&](const RowBatch& b, const std::string& needle) {
    const absl::Status s = sel->Run(*plan, b, view, ctx);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s;
  };
  RowBatch other = dm->batch;  // the same bytes declared as the other 16-bit type
  other.dtype = Dtype() == ScoreType::kBFloat16 ? ScoreType::kFloat16 : ScoreType::kBFloat16;
  expect_refused(other, "dtype");
  RowBatch wide = dm->batch;  // the 16-bit bytes behind the FP32 pointer
  wide.scores = reinterpret_cast<const float*>(wide.scores16);
  expect_refused(wide, "scores");
  RowBatch odd = dm->batch;
  odd.scores16 = reinterpret_cast<const uint16_t*>(dm->scores.get() + 1);
  expect_refused(odd, "aligned");
  ASSERT_OK(sel->Run(*plan, dm->batch, view, ctx));
  ASSERT_CUDA(cudaDeviceSynchronize());
}

INSTANTIATE_TEST_SUITE_P(KernelVariants, HalfPrecisionTest,
                         ::testing::Combine(::testing::Values(2, 4),
                                            ::testing::Values(ScoreType::kBFloat16,
                                                              ScoreType::kFloat16)),
                         VariantName);

}  // namespace
}  // namespace topk::cuda_test
