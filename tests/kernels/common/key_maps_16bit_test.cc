// Exhaustive checks of the 16-bit key maps (keys.h) over all 2^16 patterns of
// BF16 and FP16: the widening, the descending key, the coarse map and its
// cutoffs. The reference ordering is that of the FP32 values, decoded here
// from sign, exponent and mantissa with std::ldexp (and, for FP16, also by the
// compiler's _Float16), independently of keys.h.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "topk/contract.h"
#include "topk/keys.h"

namespace topk {
namespace {

struct Format {
  ScoreType type;
  int exponent_bits;
  int mantissa_bits;
};

constexpr Format kBf16{ScoreType::kBFloat16, 8, 7};
constexpr Format kFp16{ScoreType::kFloat16, 5, 10};

float Decode(uint16_t h, const Format& f) {
  const bool negative = (h & 0x8000u) != 0;
  const int exponent = (h >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1);
  const int mantissa = h & ((1 << f.mantissa_bits) - 1);
  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  double magnitude;
  if (exponent == (1 << f.exponent_bits) - 1) {
    magnitude = mantissa == 0 ? INFINITY : NAN;
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), 1 - bias - f.mantissa_bits);
  } else {
    magnitude = std::ldexp(static_cast<double>(mantissa + (1 << f.mantissa_bits)),
                           exponent - bias - f.mantissa_bits);
  }
  return static_cast<float>(negative ? -magnitude : magnitude);
}

float Widen(uint16_t h, const Format& f) {
  return f.type == ScoreType::kBFloat16 ? Bf16BitsToFloat(h) : Fp16BitsToFloat(h);
}
bool IsNan16(uint16_t h, const Format& f) {
  return f.type == ScoreType::kBFloat16 ? IsBf16Nan(h) : IsFp16Nan(h);
}
float Cutoff(uint32_t b, const Format& f) {
  return f.type == ScoreType::kBFloat16 ? CoarseCutoffBf16(b) : CoarseCutoffFp16(b);
}
uint16_t CutoffBits(uint32_t b, const Format& f) {
  return f.type == ScoreType::kBFloat16 ? CoarseCutoffBitsBf16(b) : CoarseCutoffBitsFp16(b);
}
uint32_t Coarse16(uint16_t h, const Format& f) {
  return f.type == ScoreType::kBFloat16 ? CoarseOfBf16(h) : CoarseOfFp16(h);
}
// Every type shares the FP32 coarse map's bins of the infinities.
uint32_t PlusInfBin(const Format&) { return kCoarseOfPlusInf; }
uint32_t MinusInfBin(const Format&) { return kCoarseOfMinusInf; }
uint16_t PlusInf(const Format& f) { return f.type == ScoreType::kBFloat16 ? 0x7F80u : 0x7C00u; }

// Every non-NaN pattern, sorted by its decoded value descending.
std::vector<uint16_t> NonNanPatternsDescending(const Format& f) {
  std::vector<uint16_t> patterns;
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    if (!std::isnan(Decode(static_cast<uint16_t>(h), f)))
      patterns.push_back(static_cast<uint16_t>(h));
  }
  std::stable_sort(patterns.begin(), patterns.end(),
                   [&f](uint16_t a, uint16_t b) { return Decode(a, f) > Decode(b, f); });
  return patterns;
}

class KeyMaps16Test : public ::testing::TestWithParam<Format> {};

TEST_P(KeyMaps16Test, WideningIsExactAndNanIsRecognised) {
  const Format f = GetParam();
  for (uint32_t u = 0; u < 0x10000u; ++u) {
    const uint16_t h = static_cast<uint16_t>(u);
    const float want = Decode(h, f);
    const float got = Widen(h, f);
    ASSERT_EQ(IsNan16(h, f), std::isnan(want)) << std::hex << u;
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << u;
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << std::hex << u;
    } else {
      ASSERT_EQ(FloatBits(got), FloatBits(want)) << std::hex << u;  // -0 stays -0
    }
    if (f.type == ScoreType::kFloat16) {
      _Float16 compiler;
      std::memcpy(&compiler, &h, sizeof(h));
      if (!std::isnan(want)) {
        ASSERT_EQ(FloatBits(static_cast<float>(compiler)), FloatBits(got));
      }
    }
  }
}

TEST_P(KeyMaps16Test, KeyOrdersExactlyAsTheWidenedValues) {
  const Format f = GetParam();
  const std::vector<uint16_t> sorted = NonNanPatternsDescending(f);
  ASSERT_EQ(sorted.size(), 0x10000u - 2u * ((1u << f.mantissa_bits) - 1u));
  for (size_t j = 1; j < sorted.size(); ++j) {
    const uint16_t a = sorted[j - 1];
    const uint16_t b = sorted[j];
    if (Decode(a, f) > Decode(b, f)) {
      ASSERT_LT(Key16(a), Key16(b)) << std::hex << a << " " << b;
      ASSERT_GT(Rank16(a), Rank16(b)) << std::hex << a << " " << b;
    } else {  // equal values: only the two zeros
      ASSERT_EQ(Key16(a), Key16(b)) << std::hex << a << " " << b;
      ASSERT_EQ(Rank16(a), Rank16(b)) << std::hex << a << " " << b;
      ASSERT_EQ(Decode(a, f), 0.0f);
    }
  }
  EXPECT_EQ(Key16(0x8000u), Key16(0x0000u));  // -0 ties +0
  EXPECT_EQ(Key16(sorted.front()), Key16(PlusInf(f)));
  EXPECT_EQ(sorted.back(), PlusInf(f) | 0x8000u);
  // Subnormals lie strictly between +0 and the smallest positive normal.
  const uint16_t smallest_normal = static_cast<uint16_t>(1u << f.mantissa_bits);
  EXPECT_LT(Key16(smallest_normal), Key16(0x0001u));
  EXPECT_LT(Key16(0x0001u), Key16(0x0000u));
  EXPECT_LT(Key16(0x8000u), Key16(0x8001u));
}

TEST_P(KeyMaps16Test, CoarseIsMonotoneAndBoundedByTheInfinities) {
  const Format f = GetParam();
  const std::vector<uint16_t> sorted = NonNanPatternsDescending(f);
  for (size_t j = 1; j < sorted.size(); ++j) {
    ASSERT_LE(Coarse16(sorted[j - 1], f), Coarse16(sorted[j], f)) << std::hex << sorted[j];
  }
  EXPECT_EQ(Coarse16(PlusInf(f), f), PlusInfBin(f));
  EXPECT_EQ(Coarse16(PlusInf(f) | 0x8000u, f), MinusInfBin(f));
  EXPECT_EQ(Coarse16(0x8000u, f), Coarse16(0x0000u, f));
  for (uint16_t h : sorted) {
    ASSERT_GE(Coarse16(h, f), PlusInfBin(f));
    ASSERT_LE(Coarse16(h, f), MinusInfBin(f));
    ASSERT_LT(Coarse16(h, f), static_cast<uint32_t>(kCoarseBins));
    // The coarse bin is the FP32 coarse map's bin of the same value.
    ASSERT_EQ(Coarse16(h, f), Coarse(Widen(h, f))) << std::hex << h;
  }
}

// {h : widen(h) >= Cutoff(b)} == {h : coarse(h) <= b} for every bin b. Both
// sets are prefixes of the descending order (the second by the monotonicity
// tested above), so equal sizes mean equal sets.
TEST_P(KeyMaps16Test, CutoffAdmitsExactlyTheBinsUpToB) {
  const Format f = GetParam();
  const std::vector<uint16_t> sorted = NonNanPatternsDescending(f);
  std::vector<float> values(sorted.size());
  std::vector<int64_t> in_bin(kCoarseBins, 0);
  for (size_t j = 0; j < sorted.size(); ++j) {
    values[j] = Decode(sorted[j], f);
    ++in_bin[Coarse16(sorted[j], f)];
  }
  int64_t at_or_before = 0;
  for (uint32_t b = 0; b < static_cast<uint32_t>(kCoarseBins); ++b) {
    at_or_before += in_bin[b];
    const float cutoff = Cutoff(b, f);
    // Count of values >= cutoff in the descending array (none for a NaN cutoff).
    const int64_t admitted =
        std::isnan(cutoff) ? 0
                           : std::partition_point(values.begin(), values.end(), [cutoff](float v) {
                               return v >= cutoff;
                             }) - values.begin();
    ASSERT_EQ(admitted, at_or_before) << "bin " << b << " cutoff " << cutoff;
    // The same set by integer ranks (how the CPU admits 16-bit values).
    const int32_t rank_cutoff = Rank16(CutoffBits(b, f));
    const int64_t admitted_by_rank =
        std::partition_point(sorted.begin(), sorted.end(),
                             [rank_cutoff](uint16_t h) { return Rank16(h) >= rank_cutoff; }) -
        sorted.begin();
    ASSERT_EQ(admitted_by_rank, at_or_before) << "bin " << b;
  }
  EXPECT_EQ(at_or_before, static_cast<int64_t>(sorted.size()));
}

INSTANTIATE_TEST_SUITE_P(Types, KeyMaps16Test, ::testing::Values(kBf16, kFp16),
                         [](const ::testing::TestParamInfo<Format>& info) {
                           return std::string(ScoreTypeName(info.param.type));
                         });

// FP32 -> BF16 rounding: every BF16 value round-trips, every midpoint between
// neighbours goes to the even one, and values past the largest finite BF16's
// midpoint become infinity.
TEST(Bf16RoundingTest, RoundTripsMidpointsAndOverflow) {
  for (uint32_t u = 0; u < 0x10000u; ++u) {
    const uint16_t h = static_cast<uint16_t>(u);
    const float x = Bf16BitsToFloat(h);
    if (IsBf16Nan(h)) {
      ASSERT_TRUE(IsBf16Nan(Bf16BitsRoundNearest(x))) << std::hex << u;
      continue;
    }
    ASSERT_EQ(Bf16BitsRoundNearest(x), h) << std::hex << u;
    if ((h & 0x7FFFu) >= 0x7F80u) continue;  // infinities have no upper neighbour
    const float midpoint = BitsToFloat((static_cast<uint32_t>(h) << 16) | 0x8000u);
    const uint16_t even = (h & 1u) ? static_cast<uint16_t>(h + 1u) : h;
    ASSERT_EQ(Bf16BitsRoundNearest(midpoint), even) << std::hex << u;
    const float above = BitsToFloat((static_cast<uint32_t>(h) << 16) | 0x8001u);
    ASSERT_EQ(Bf16BitsRoundNearest(above), static_cast<uint16_t>(h + 1u)) << std::hex << u;
  }
  EXPECT_EQ(Bf16BitsRoundNearest(3.4e38f), 0x7F80u);
  EXPECT_EQ(Bf16BitsRoundNearest(-3.4e38f), 0xFF80u);
}

}  // namespace
}  // namespace topk
