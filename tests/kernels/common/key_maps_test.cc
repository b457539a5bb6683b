// Exhaustive checks of the shared key maps (keys.h) over all 2^32 FP32 bit
// patterns: the GPU and CPU selectors' exactness rests on these.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "topk/keys.h"

namespace topk {
namespace {

// The compiler's FP32 -> FP16 conversion (round to nearest even). With F16C
// this is one vcvtps2ph; without it, libgcc's soft conversion (slower).
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("f16c"))) uint16_t HalfF16c(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t u;
  std::memcpy(&u, &h, sizeof(u));
  return u;
}
bool HaveF16c() { return __builtin_cpu_supports("f16c"); }
#else
uint16_t HalfF16c(float f) {  // never called: HaveF16c() is false
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t u;
  std::memcpy(&u, &h, sizeof(u));
  return u;
}
bool HaveF16c() { return false; }
#endif
uint16_t HalfSoft(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t u;
  std::memcpy(&u, &h, sizeof(u));
  return u;
}

bool IsHalfNan(uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0; }

// What one thread learns from a contiguous range of descending keys.
struct SweepResult {
  uint64_t half_mismatches = 0;
  uint32_t first_half_mismatch = 0;
  uint64_t coarse_not_monotone = 0;
  uint64_t key32_not_monotone = 0;
  uint32_t first_bad_key = 0;
  std::array<int64_t, kCoarseBins> last_key_of_bin;  // -1: empty
};

template <uint16_t (*Hardware)(float)>
void Sweep(uint64_t begin, uint64_t end, SweepResult* out) {
  SweepResult r;
  r.last_key_of_bin.fill(-1);
  uint32_t prev_coarse = 0;
  uint32_t prev_key32 = 0;
  float prev_value = 0.0f;
  bool have_prev = false;
  for (uint64_t key64 = begin; key64 < end; ++key64) {
    const uint32_t key = static_cast<uint32_t>(key64);
    const float f = BitsToFloat(BitsOfDescendingKey(key));
    const uint16_t mine = HalfBitsRoundNearest(f);
    if (IsNan(f)) {
      if (!IsHalfNan(mine) || !IsHalfNan(Hardware(f))) {
        if (r.half_mismatches++ == 0) r.first_half_mismatch = FloatBits(f);
      }
      continue;
    }
    if (mine != Hardware(f) && r.half_mismatches++ == 0) r.first_half_mismatch = FloatBits(f);
    const uint32_t coarse = Coarse(f);
    const uint32_t key32 = Key32(f);
    if (have_prev) {
      // Keys ascend, so values descend (numerically) and both maps ascend.
      if (coarse < prev_coarse) ++r.coarse_not_monotone;
      const bool both_zero = f == 0.0f && prev_value == 0.0f;
      if (!(prev_value > f || both_zero) ||
          !(prev_key32 < key32 || (both_zero && prev_key32 == key32))) {
        if (r.key32_not_monotone++ == 0) r.first_bad_key = key;
      }
    }
    r.last_key_of_bin[coarse] = key;
    prev_coarse = coarse;
    prev_key32 = key32;
    prev_value = f;
    have_prev = true;
  }
  *out = r;
}

TEST(KeyMapsTest, ExhaustiveOverAllFloatPatterns) {
  const bool f16c = HaveF16c();
  // Non-NaN keys are contiguous: [key(+inf), key(-inf)]; NaNs sit on both sides.
  // Split at key(+0) | key(-0) so no thread has to look across its boundary.
  const uint64_t split = 0x80000000ull;
  std::array<SweepResult, 2> results;
  auto run = [&](uint64_t b, uint64_t e, SweepResult* out) {
    f16c ? Sweep<HalfF16c>(b, e, out) : Sweep<HalfSoft>(b, e, out);
  };
  std::thread second(run, split, uint64_t{1} << 32, &results[1]);
  run(0, split, &results[0]);
  second.join();

  std::array<int64_t, kCoarseBins> last = results[0].last_key_of_bin;
  for (int b = 0; b < kCoarseBins; ++b) {
    last[b] = std::max(last[b], results[1].last_key_of_bin[b]);
  }
  for (const SweepResult& r : results) {
    EXPECT_EQ(r.half_mismatches, 0u)
        << "HalfBitsRoundNearest differs from _Float16 first at bits 0x" << std::hex
        << r.first_half_mismatch;
    EXPECT_EQ(r.coarse_not_monotone, 0u);
    EXPECT_EQ(r.key32_not_monotone, 0u) << "first at key 0x" << std::hex << r.first_bad_key;
  }
  // Across the split: +0.0 (last of the first half) and -0.0 tie.
  EXPECT_EQ(Key32(0.0f), Key32(-0.0f));
  EXPECT_EQ(Coarse(0.0f), Coarse(-0.0f));

  // Non-NaN values fill exactly the bins [kCoarseOfPlusInf, kCoarseOfMinusInf].
  for (int b = 0; b < kCoarseBins; ++b) {
    const bool inside =
        b >= static_cast<int>(kCoarseOfPlusInf) && b <= static_cast<int>(kCoarseOfMinusInf);
    if (!inside) {
      EXPECT_EQ(last[b], -1) << "bin " << b << " holds a non-NaN value";
    }
  }
  EXPECT_NE(last[kCoarseOfPlusInf], -1);
  EXPECT_NE(last[kCoarseOfMinusInf], -1);

  // CoarseCutoff(b) is the value of the largest key whose bin is <= b.
  int64_t boundary = -1;
  int checked = 0;
  for (uint32_t b = kCoarseOfPlusInf; b < kCoarseOfMinusInf; ++b) {
    boundary = std::max(boundary, last[b]);
    const uint32_t want = BitsOfDescendingKey(static_cast<uint32_t>(boundary));
    ASSERT_EQ(FloatBits(CoarseCutoff(b)), want) << "bin " << b;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(kCoarseOfMinusInf - kCoarseOfPlusInf));
  EXPECT_TRUE(IsNan(CoarseCutoff(kCoarseOfPlusInf - 1)));
  EXPECT_EQ(CoarseCutoff(kCoarseOfMinusInf), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(CoarseCutoff(kCoarseBins - 1), -std::numeric_limits<float>::infinity());
}

TEST(KeyMapsTest, CoarseCutoffClosedFormIsTheSearchsCutoff) {
  for (uint32_t b = 0; b < kCoarseBins; ++b) {
    ASSERT_EQ(FloatBits(CoarseCutoffClosedForm(b)), FloatBits(CoarseCutoff(b))) << "bin " << b;
  }
}

TEST(KeyMapsTest, Key32OrdersSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float denorm = std::numeric_limits<float>::denorm_min();
  const float ordered[] = {
      inf,   std::numeric_limits<float>::max(),  1.0f, 1e-38f, denorm, 0.0f, -denorm, -1e-38f,
      -1.0f, -std::numeric_limits<float>::max(), -inf};
  for (size_t i = 1; i < std::size(ordered); ++i) {
    EXPECT_LT(Key32(ordered[i - 1]), Key32(ordered[i])) << ordered[i - 1] << " vs " << ordered[i];
    EXPECT_LE(Coarse(ordered[i - 1]), Coarse(ordered[i]));
  }
  EXPECT_EQ(Key32(inf), kKeyOfPlusInf);
  EXPECT_EQ(Key32(-inf), kKeyOfMinusInf);
  EXPECT_EQ(Coarse(inf), kCoarseOfPlusInf);
  EXPECT_EQ(Coarse(-inf), kCoarseOfMinusInf);
  EXPECT_EQ(Coarse(70000.0f), kCoarseOfPlusInf);  // beyond FP16: rounds to inf
  // The cutoff of the zero bin admits both zeros.
  const float zero_cut = CoarseCutoff(Coarse(0.0f));
  EXPECT_TRUE(-0.0f >= zero_cut && 0.0f >= zero_cut);
  EXPECT_FALSE(-denorm >= zero_cut && Coarse(-denorm) != Coarse(0.0f));
}

TEST(KeyMapsTest, DigitsReassembleTheKey) {
  for (uint32_t key : {0u, 1u, 0x12345678u, 0xFFFFFFFFu, 0x80000000u, 0x7FFFFFFFu}) {
    EXPECT_EQ((KeyDigit0(key) << 21) | (KeyDigit1(key) << 10) | KeyDigit2(key), key);
    EXPECT_EQ(KeyPrefixAbove(key, 2), key >> 10);
  }
}

}  // namespace
}  // namespace topk
