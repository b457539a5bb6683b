// Generators are reproducible, fill padding, honour length patterns and
// produce the structure their names promise.
#include "topk/testing/generators.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "gtest/gtest.h"
#include "topk/keys.h"
#include "topk/testing/reference.h"
#include "topk/testing/score_types.h"
#include "topk/testing/verifier.h"

namespace topk::testing {
namespace {

TEST(GeneratorsTest, ReproducibleAndSeedSensitive) {
  for (Distribution d : kAllDistributions) {
    GeneratorSpec spec{.distribution = d, .rows = 3, .width = 1000, .seed = 7};
    const ScoreMatrix a = Generate(spec);
    const ScoreMatrix b = Generate(spec);
    EXPECT_EQ(0, std::memcmp(a.scores.data(), b.scores.data(), a.scores.size() * sizeof(float)))
        << DistributionName(d);
    spec.seed = 8;
    const ScoreMatrix c = Generate(spec);
    const bool fixed = d == Distribution::kAllMinusInf;
    EXPECT_EQ(fixed,
              0 == std::memcmp(a.scores.data(), c.scores.data(), a.scores.size() * sizeof(float)))
        << DistributionName(d);
    for (float x : a.scores) EXPECT_FALSE(IsNan(x)) << DistributionName(d);
  }
}

TEST(GeneratorsTest, NamesAreDistinct) {
  std::set<std::string_view> names;
  for (Distribution d : kAllDistributions) names.insert(DistributionName(d));
  EXPECT_EQ(names.size(), std::size(kAllDistributions));
}

TEST(GeneratorsTest, LengthPatternsAndPadding) {
  GeneratorSpec spec{.lengths = LengthPattern::kCausalTerminal,
                     .rows = 4,
                     .width = 100,
                     .pitch = 104,
                     .padding = -7.0f};
  ScoreMatrix m = Generate(spec);
  EXPECT_EQ(m.lengths, (std::vector<int32_t>{97, 98, 99, 100}));
  EXPECT_EQ(m.pitch, 104);
  EXPECT_EQ(m.scores[97], -7.0f);
  EXPECT_EQ(m.scores[3 * 104 + 100], -7.0f);
  spec.lengths = LengthPattern::kEdges;
  spec.k = 10;
  spec.rows = 6;
  EXPECT_EQ(Generate(spec).lengths, (std::vector<int32_t>{0, 1, 9, 10, 11, 100}));
  spec.lengths = LengthPattern::kRandom;
  spec.rows = 200;
  for (int32_t l : Generate(spec).lengths) EXPECT_TRUE(l >= 0 && l <= 100);
}

TEST(GeneratorsTest, PackedRowsAreUnalignedAndPadded) {
  GeneratorSpec spec{.lengths = LengthPattern::kRandom,
                     .rows = 50,
                     .width = 37,
                     .layout = Layout::kPacked,
                     .padding = 1e30f};
  const ScoreMatrix m = Generate(spec);
  bool unaligned = false;
  for (int64_t r = 0; r < m.rows; ++r) {
    unaligned |= m.row_offsets[r] % 4 != 0;
    if (r + 1 < m.rows) {
      EXPECT_GE(m.row_offsets[r + 1], m.row_offsets[r] + m.lengths[r]);
    }
  }
  EXPECT_TRUE(unaligned);
  EXPECT_EQ(m.scores.back(), 1e30f);
  EXPECT_EQ(m.batch().row(1), m.scores.data() + m.row_offsets[1]);
}

TEST(GeneratorsTest, DistributionsHaveTheirStructure) {
  auto row = [](Distribution d, int64_t n) {
    std::vector<float> v(n);
    FillRow(d, 3, 0, v.data(), n);
    return v;
  };
  std::vector<float> v = row(Distribution::kFp8Ties, 100000);
  EXPECT_LT(std::set<float>(v.begin(), v.end()).size(), 300u);  // very heavy ties
  v = row(Distribution::kBf16Ties, 100000);
  EXPECT_LT(std::set<float>(v.begin(), v.end()).size(), 5000u);
  v = row(Distribution::kIndexer, 100000);
  EXPECT_GT(std::set<float>(v.begin(), v.end()).size(), 20000u);
  EXPECT_GT(v[0], v[5000]);  // attention sink
  v = row(Distribution::kOneBinCluster, 10000);
  for (float x : v) EXPECT_EQ(Coarse(x), Coarse(v[0]));
  v = row(Distribution::kSubnormals, 10000);
  for (float x : v) EXPECT_LT(std::fabs(x), 1.2e-38f);
  v = row(Distribution::kSignedZeros, 1000);
  int negative_zeros = 0;
  for (float x : v) negative_zeros += FloatBits(x) == 0x80000000u;
  EXPECT_GT(negative_zeros, 100);
  v = row(Distribution::kInfMix, 1000);
  int infs = 0;
  for (float x : v) infs += std::isinf(x);
  EXPECT_GT(infs, 100);
}

TEST(GeneratorsTest, IndexerIsFastForMillionWideRows) {
  std::vector<float> v(1 << 20);
  FillRow(Distribution::kIndexer, 1, 5, v.data(), v.size());  // must not time out
  EXPECT_GT(*std::max_element(v.begin(), v.end()), 0.0f);
}

TEST(GeneratorsTest, GeneratedBatchesPassTheReference) {
  for (Distribution d : kAllDistributions) {
    for (Layout layout : {Layout::kPitched, Layout::kPacked}) {
      GeneratorSpec spec{.distribution = d,
                         .lengths = LengthPattern::kEdges,
                         .rows = 12,
                         .width = 300,
                         .k = 16,
                         .layout = layout};
      const ScoreMatrix m = Generate(spec);
      std::vector<int32_t> out(m.rows * 16);
      SelectOptions det{.sorted = false, .deterministic = true};
      ASSERT_TRUE(ReferenceSelect(m.batch(), 16, det, {out.data(), nullptr}).ok());
      EXPECT_TRUE(VerifySelection(m.batch(), 16, det, out.data()).ok()) << DistributionName(d);
    }
  }
}

// 16-bit matrices: the FP32 rows rounded to the type behind scores16, BF16
// ties far heavier than FP32's, and subnormals that stay subnormal.
TEST(GeneratorsTest, SixteenBitMatricesRoundTheFp32Rows) {
  for (ScoreType dtype : {ScoreType::kBFloat16, ScoreType::kFloat16}) {
    for (Layout layout : {Layout::kPitched, Layout::kPacked}) {
      GeneratorSpec spec{.distribution = Distribution::kIndexer,
                         .lengths = LengthPattern::kRandom,
                         .rows = 5,
                         .width = 4000,
                         .layout = layout,
                         .seed = 3};
      const ScoreMatrix wide = Generate(spec);
      spec.dtype = dtype;
      const ScoreMatrix narrow = Generate(spec);
      const RowBatch b = narrow.batch();
      EXPECT_EQ(b.dtype, dtype);
      EXPECT_EQ(b.scores, nullptr);
      ASSERT_EQ(b.scores16, narrow.scores16.data());
      ASSERT_EQ(narrow.scores16.size(), wide.scores.size());
      EXPECT_EQ(narrow.lengths, wide.lengths);
      for (size_t i = 0; i < wide.scores.size(); ++i) {
        ASSERT_EQ(narrow.scores16[i], NarrowScore(wide.scores[i], dtype)) << i;
      }
    }
  }
}

TEST(GeneratorsTest, Bf16RowsHaveHeavyTies) {
  GeneratorSpec spec{.distribution = Distribution::kIndexer, .rows = 1, .width = 100000};
  const ScoreMatrix wide = Generate(spec);
  spec.dtype = ScoreType::kBFloat16;
  const ScoreMatrix narrow = Generate(spec);
  const std::set<float> distinct_wide(wide.scores.begin(), wide.scores.end());
  const std::set<uint16_t> distinct_narrow(narrow.scores16.begin(), narrow.scores16.end());
  EXPECT_GT(distinct_wide.size(), 10 * distinct_narrow.size());
  EXPECT_GT(distinct_narrow.size(), 10u);  // ties, yet not a constant row
}

TEST(GeneratorsTest, SixteenBitSubnormalsStaySubnormal) {
  for (ScoreType dtype : {ScoreType::kBFloat16, ScoreType::kFloat16}) {
    const uint16_t exponent_mask = dtype == ScoreType::kBFloat16 ? 0x7F80u : 0x7C00u;
    const ScoreMatrix m = Generate(
        {.distribution = Distribution::kSubnormals, .rows = 2, .width = 5000, .dtype = dtype});
    int64_t subnormal = 0;
    int64_t zero = 0;
    for (uint16_t h : m.scores16) {
      ASSERT_EQ(h & exponent_mask, 0) << std::hex << h;
      zero += (h & 0x7FFFu) == 0;
      subnormal += (h & 0x7FFFu) != 0;
    }
    EXPECT_GT(subnormal, 8000) << ScoreTypeName(dtype);
    EXPECT_GT(zero, 0) << ScoreTypeName(dtype);
  }
}

}  // namespace
}  // namespace topk::testing
