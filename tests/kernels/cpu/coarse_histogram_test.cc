// The vectorised coarse histogram (F16C when present) must count exactly like
// Coarse() one value at a time: the exact route's correctness rests on it.
#include "coarse_histogram.h"

#include <array>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "topk/keys.h"
#include "topk/testing/generators.h"

namespace topk::cpu {
namespace {

using Histogram = std::array<uint32_t, kCoarseBins>;

Histogram Fast(const std::vector<float>& v) {
  Histogram h{};
  AddCoarseHistogram(v.data(), static_cast<int64_t>(v.size()), h.data());
  return h;
}
Histogram Slow(const std::vector<float>& v) {
  Histogram h{};
  AddCoarseHistogramScalar(v.data(), static_cast<int64_t>(v.size()), h.data());
  return h;
}

TEST(CoarseHistogramTest, MatchesScalarOnEveryDistribution) {
  for (testing::Distribution d : testing::kAllDistributions) {
    std::vector<float> v(100003);
    testing::FillRow(d, 5, 1, v.data(), static_cast<int64_t>(v.size()));
    EXPECT_EQ(Fast(v), Slow(v)) << testing::DistributionName(d);
  }
}

TEST(CoarseHistogramTest, MatchesCoarseOnAStrideOfAllBitPatterns) {
  // Every 4099th pattern (odd stride: all exponents, signs, rounding cases).
  std::vector<float> v;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 4099) {
    v.push_back(BitsToFloat(static_cast<uint32_t>(bits)));
  }
  // Rounding midpoints and the edges named in keys.h.
  for (uint32_t bits : {0x477FF000u, 0x477FEFFFu, 0x38800000u, 0x387FFFFFu, 0x33000000u,
                        0x33000001u, 0x80000000u, 0x00000000u, 0x7F800000u, 0xFF800000u}) {
    v.push_back(BitsToFloat(bits));
    v.push_back(BitsToFloat(bits | 0x80000000u));
  }
  const Histogram fast = Fast(v);
  Histogram want{};
  for (float x : v) ++want[IsNan(x) ? 15 : Coarse(x)];
  EXPECT_EQ(fast, want);
}

}  // namespace
}  // namespace topk::cpu
