// The CPU selector, the oracle and the verifier on BF16 and FP16 rows: what
// the all-type suites (cpu_selector_test, cpu_property_test) cannot reach
// through the generators: NaN patterns next to the infinities,
// hand-built ties at the K-th value, the route counters on 16-bit rows, and
// the contract checks of the score pointer and type.
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "selector_test_util.h"
#include "topk/keys.h"
#include "topk/testing/score_types.h"

namespace topk::testing {
namespace {

constexpr ScoreType k16BitTypes[] = {ScoreType::kBFloat16, ScoreType::kFloat16};

// A pitched 16-bit matrix owned by the test.
struct Matrix16 {
  ScoreType dtype;
  int64_t width;
  std::vector<uint16_t> bits;
  std::vector<int32_t> lengths;
  RowBatch batch() const {
    RowBatch b;
    b.dtype = dtype;
    b.scores16 = bits.data();
    b.pitch = width;
    b.lengths = lengths.data();
    b.num_rows = static_cast<int64_t>(lengths.size());
    b.width = width;
    return b;
  }
};

std::string Name(const ::testing::TestParamInfo<ScoreType>& info) {
  return std::string(ScoreTypeName(info.param));
}

class Cpu16BitTest : public ::testing::TestWithParam<ScoreType> {};

// NaN patterns of each type, including the ones next to the infinities'
// patterns (BF16 0x7F81, FP16 0x7C01) and negative ones, on and off the
// strided view.
TEST_P(Cpu16BitTest, NanInValidPrefixIsReportedPerRow) {
  const ScoreType dtype = GetParam();
  const bool bf16 = dtype == ScoreType::kBFloat16;
  const uint16_t quiet_nan = bf16 ? 0x7FC0u : 0x7E00u;
  const uint16_t nan_next_to_inf = bf16 ? 0x7F81u : 0x7C01u;
  const uint16_t negative_nan = bf16 ? 0xFF81u : 0xFC01u;
  const int64_t width = 50000;
  const int32_t k = 100;
  Matrix16 m{dtype,
             width,
             std::vector<uint16_t>(7 * width),
             {50000, 50000, 40000, 50, 50000, 20000, 50000}};
  std::vector<float> row(width);
  for (int64_t r = 0; r < 7; ++r) {
    FillRow(Distribution::kIndexer, 9, r, row.data(), width);
    for (int64_t i = 0; i < width; ++i) m.bits[r * width + i] = NarrowScore(row[i], dtype);
  }
  m.bits[0 * width + 12345] = quiet_nan;           // long row, sampled path
  m.bits[1 * width + 37] = nan_next_to_inf;        // on row 1's strided view (phase 37)
  m.bits[2 * width + 45000] = quiet_nan;           // beyond L: padding, ignored
  m.bits[3 * width + 49] = quiet_nan;              // short row (L <= K), last valid value
  m.bits[4 * width + 49999] = negative_nan;        // negative NaN, last valid value
  m.bits[6 * width + 6 * 37 % 64] = negative_nan;  // on row 6's strided view
  for (bool sampling : {true, false}) {
    CpuSelector selector(CpuSelectorConfig{.threads = 2, .enable_sampling = sampling});
    const Selection got = RunSelector(selector, m.batch(), k, {});
    ASSERT_TRUE(got.status.ok()) << got.status;
    const std::vector<RowStatus> want = {RowStatus::kNan, RowStatus::kNan, RowStatus::kOk,
                                         RowStatus::kNan, RowStatus::kNan, RowStatus::kOk,
                                         RowStatus::kNan};
    EXPECT_EQ(got.row_status, want);
    for (int r : {0, 1, 3, 4, 6}) {
      for (int j = 0; j < k; ++j) ASSERT_EQ(got.indices[r * k + j], kEmptySlot) << r;
    }
    EXPECT_TRUE(VerifySelection(m.batch(), k, {}, got.indices.data(), got.row_status.data()).ok());
  }
}

// Ties at the K-th value: a row of few distinct values, the K-th one shared by
// thousands of positions, so the deterministic answer depends on every tie
// going to the smallest indices; also +/-0 and the infinities at the boundary.
TEST_P(Cpu16BitTest, TiesAtTheKthValueGoToTheSmallestIndices) {
  const ScoreType dtype = GetParam();
  const int64_t width = 70000;
  const float palette[] = {0.5f, 1.0f, 1.0f, 1.0f, -0.0f, 0.0f, -2.0f, INFINITY, -INFINITY};
  Matrix16 m{dtype, width, std::vector<uint16_t>(4 * width), {70000, 70000, 69999, 65536}};
  uint64_t state = 5;
  for (int64_t i = 0; i < 4 * width; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    m.bits[i] = NarrowScore(palette[(state >> 33) % std::size(palette)], dtype);
  }
  for (int32_t k : {1, 100, 2048, 7777, 30000}) {
    for (bool sampling : {true, false}) {
      CpuSelector selector(CpuSelectorConfig{.threads = 2, .enable_sampling = sampling});
      for (SelectOptions o : {SelectOptions{.deterministic = true},
                              SelectOptions{.sorted = true, .deterministic = true}}) {
        const Selection got = RunSelector(selector, m.batch(), k, o);
        ASSERT_TRUE(got.status.ok()) << got.status;
        const absl::Status v =
            VerifySelection(m.batch(), k, o, got.indices.data(), got.row_status.data());
        ASSERT_TRUE(v.ok()) << "k " << k << ": " << v;
        ASSERT_EQ(got.indices, RunReference(m.batch(), k, o).indices) << "k " << k;
      }
    }
  }
}

// The stride-periodic rows fool the proposal in 16 bits as in 32: the band
// rescue and the exact recovery run, and stay exact.
TEST_P(Cpu16BitTest, RescueAndRecoveryRunOnStridePeriodicRows) {
  const int32_t k = 2048;
  const GeneratorSpec spec{.distribution = Distribution::kStridePeriodic,
                           .rows = 64,
                           .width = 65536,
                           .k = k,
                           .dtype = GetParam()};
  const ScoreMatrix m = Generate(spec);
  CpuSelector selector(CpuSelectorConfig{.threads = 2});
  const SelectOptions det{.deterministic = true};
  const Selection got = RunSelector(selector, m.batch(), k, det);
  ASSERT_TRUE(got.status.ok());
  const CpuRouteStats stats = selector.last_run_stats();
  EXPECT_GT(stats.band_rescued, 0);
  EXPECT_GT(stats.exact_recovery, 0);
  EXPECT_TRUE(VerifySelection(m.batch(), k, det, got.indices.data(), got.row_status.data()).ok());
  EXPECT_EQ(got.indices, RunReference(m.batch(), k, det).indices);
}

TEST_P(Cpu16BitTest, IndexerRowsAreCertified) {
  const int32_t k = 2048;
  const GeneratorSpec spec{.distribution = Distribution::kIndexer,
                           .rows = 16,
                           .width = 200000,
                           .k = k,
                           .dtype = GetParam()};
  const ScoreMatrix m = Generate(spec);
  CpuSelector selector(CpuSelectorConfig{.threads = 2});
  const Selection got = RunSelector(selector, m.batch(), k, {});
  ASSERT_TRUE(got.status.ok());
  EXPECT_EQ(selector.last_run_stats().certified, 16);
  EXPECT_TRUE(VerifySelection(m.batch(), k, {}, got.indices.data(), got.row_status.data()).ok());
}

// The batch's score pointer must be the one of its type, and its type the
// plan's: a 16-bit batch read as floats (or the reverse) reads wrong bytes.
TEST_P(Cpu16BitTest, ContractChecksTheScorePointerAndType) {
  const ScoreType dtype = GetParam();
  CpuSelector selector(CpuSelectorConfig{.threads = 1});
  Matrix16 m{dtype, 100, std::vector<uint16_t>(200, NarrowScore(1.5f, dtype)), {100, 60}};
  absl::StatusOr<Plan> plan16 = selector.MakePlan({4, 2, 100, Layout::kPitched, dtype}, {});
  absl::StatusOr<Plan> plan32 = selector.MakePlan({4, 2, 100, Layout::kPitched}, {});
  ASSERT_TRUE(plan16.ok() && plan32.ok());
  EXPECT_NE(plan16->Explain().find(std::string(ScoreTypeName(dtype))), std::string::npos);
  std::vector<int32_t> out(8);
  RowBatch batch = m.batch();
  EXPECT_TRUE(selector.Run(*plan16, batch, {out.data(), nullptr}, {}).ok());
  absl::Status s = selector.Run(*plan32, batch, {out.data(), nullptr}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("dtype"), std::string::npos) << s;

  std::vector<float> floats(200, 1.5f);
  batch.scores = floats.data();  // both pointers set
  s = selector.Run(*plan16, batch, {out.data(), nullptr}, {});
  EXPECT_NE(s.message().find("scores:"), std::string::npos) << s;
  batch.scores16 = nullptr;  // only the FP32 pointer for a 16-bit batch
  s = selector.Run(*plan16, batch, {out.data(), nullptr}, {});
  EXPECT_NE(s.message().find("scores: set for a"), std::string::npos) << s;
  batch.scores = nullptr;  // no pointer at all
  s = selector.Run(*plan16, batch, {out.data(), nullptr}, {});
  EXPECT_NE(s.message().find("scores16: null"), std::string::npos) << s;

  RowBatch unknown = m.batch();
  unknown.dtype = static_cast<ScoreType>(9);
  s = selector.Run(*plan16, unknown, {out.data(), nullptr}, {});
  EXPECT_NE(s.message().find("dtype = 9"), std::string::npos) << s;
  EXPECT_FALSE(selector.MakePlan({4, 2, 100, Layout::kPitched, unknown.dtype}, {}).ok());
}

INSTANTIATE_TEST_SUITE_P(Types, Cpu16BitTest, ::testing::ValuesIn(k16BitTypes), Name);

// The oracles widen 16-bit rows: a wrong answer on BF16 ties is rejected.
TEST(Verifier16BitTest, RejectsAWrongAnswerOnBf16Ties) {
  // 1.0, 1.00390625 (rounds to 1.0 in BF16: a tie), 1.0078125, 0.5
  const float values[] = {1.0f, 1.00390625f, 1.0078125f, 0.5f};
  Matrix16 m{ScoreType::kBFloat16, 4, {}, {4}};
  for (float v : values) m.bits.push_back(NarrowScore(v, ScoreType::kBFloat16));
  ASSERT_EQ(m.bits[0], m.bits[1]);
  const SelectOptions det{.deterministic = true};
  std::vector<int32_t> right = {0, 2};
  EXPECT_TRUE(VerifySelection(m.batch(), 2, det, right.data()).ok());
  std::vector<int32_t> tie_wrong = {1, 2};  // the tie must go to index 0
  EXPECT_FALSE(VerifySelection(m.batch(), 2, det, tie_wrong.data()).ok());
  EXPECT_TRUE(VerifySelection(m.batch(), 2, {}, tie_wrong.data()).ok());  // any tie, unordered
  std::vector<int32_t> too_small = {0, 3};                                // 0.5 left 1.0078125 out
  EXPECT_FALSE(VerifySelection(m.batch(), 2, {}, too_small.data()).ok());
  EXPECT_EQ(RunReference(m.batch(), 2, det).indices, right);
}

}  // namespace
}  // namespace topk::testing
