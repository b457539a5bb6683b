// The key maps of docs/design.md section 2, shared by the CPU and CUDA selectors.
//
// key32(x): 32-bit DESCENDING sortable key of an FP32 value (larger value ->
//   smaller key). -0.0 is canonicalised to +0.0 first, so the two zeros tie,
//   as numeric ordering says they do; a raw float compare `x >= t` then admits
//   exactly an upper set of this key order.
// coarse(x): 11-bit monotone bin, x > y => coarse(x) <= coarse(y). The value is
//   rounded to FP16 (nearest-even) and the top 11 bits of the FP16 descending
//   key are kept: sign, 5 exponent bits, 5 mantissa bits = 1/32-octave bins.
// CoarseCutoff(b): the smallest FP32 value whose coarse bin is <= b, so that
//   {x : x >= CoarseCutoff(b)} == {x : coarse(x) <= b} for every non-NaN x.
//
// NaN is not a score; these maps give it some key, and the selectors detect it
// separately.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define TOPK_HD __host__ __device__ __forceinline__
#else
#define TOPK_HD inline
#endif

namespace topk {

inline constexpr int kCoarseBins = 2048;  // 11-bit coarse key
inline constexpr int kDigitBits[3] = {11, 11, 10};
inline constexpr int kDigit0Bins = 2048;
inline constexpr int kDigit1Bins = 2048;
inline constexpr int kDigit2Bins = 1024;

TOPK_HD uint32_t FloatBits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
#endif
}

TOPK_HD float BitsToFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
#endif
}

TOPK_HD bool IsNan(float x) { return (FloatBits(x) & 0x7FFFFFFFu) > 0x7F800000u; }

// Descending key of raw FP32 bits (no zero canonicalisation).
TOPK_HD uint32_t DescendingKeyOfBits(uint32_t u) {
  return (u & 0x80000000u) ? u : (0x7FFFFFFFu - u);
}

// Inverse of DescendingKeyOfBits.
TOPK_HD uint32_t BitsOfDescendingKey(uint32_t key) {
  return (key & 0x80000000u) ? key : (0x7FFFFFFFu - key);
}

TOPK_HD uint32_t Key32(float x) {
  uint32_t u = FloatBits(x);
  if (u == 0x80000000u) u = 0;  // -0.0 ties with +0.0
  return DescendingKeyOfBits(u);
}

TOPK_HD uint32_t KeyDigit0(uint32_t key) { return key >> 21; }
TOPK_HD uint32_t KeyDigit1(uint32_t key) { return (key >> 10) & 0x7FFu; }
TOPK_HD uint32_t KeyDigit2(uint32_t key) { return key & 0x3FFu; }
TOPK_HD uint32_t KeyDigit(uint32_t key, int j) {
  return j == 0 ? KeyDigit0(key) : (j == 1 ? KeyDigit1(key) : KeyDigit2(key));
}
// Bits of the key above digit j: two keys share a frontier at digit j iff
// their prefixes agree.
TOPK_HD uint32_t KeyPrefixAbove(uint32_t key, int j) {
  return j == 0 ? 0u : (j == 1 ? (key >> 21) : (key >> 10));
}

// FP32 -> FP16 bits, round to nearest even, overflow to infinity: the
// definition, in integer arithmetic (tested exhaustively against _Float16).
TOPK_HD uint16_t HalfBitsRoundNearestSoftware(float f) {
  const uint32_t x = FloatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);   // NaN
  if (ax >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520: inf
  if (ax >= 0x38800000u) {  // normal FP16 range, >= 2^-14
    const uint32_t rounded = ax + 0xFFFu + ((ax >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  if (ax <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25: zero
  // FP16 subnormal: count units of 2^-24 with round-to-nearest-even.
  const uint32_t exponent = ax >> 23;  // 102..112
  const uint32_t mantissa = (ax & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - exponent;  // 14..24
  uint32_t units = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (units & 1u))) ++units;
  return static_cast<uint16_t>(sign | units);
}

// The same map; on the GPU one cvt.rn.f16.f32 instead of ~30 integer
// instructions (the proposal and exact-route histograms evaluate it per
// value). NaN keeps the software's pattern so both sides agree on every input
// (tests/kernels/cuda checks all 2^32 patterns on the device).
TOPK_HD uint16_t HalfBitsRoundNearest(float f) {
#if defined(__CUDA_ARCH__)
  const uint16_t h = __half_as_ushort(__float2half_rn(f));
  return IsNan(f) ? static_cast<uint16_t>(((FloatBits(f) >> 16) & 0x8000u) | 0x7E00u) : h;
#else
  return HalfBitsRoundNearestSoftware(f);
#endif
}

// Descending key of raw 16-bit patterns (no zero canonicalisation).
TOPK_HD uint32_t DescendingKey16OfBits(uint32_t h) { return (h & 0x8000u) ? h : (0x7FFFu - h); }

// The coarse bin: the top 11 bits of the descending key of the value's FP16
// rounding.
TOPK_HD uint32_t Coarse(float x) {
  if (FloatBits(x) == 0x80000000u) x = 0.0f;  // -0.0 shares +0.0's bin
  return DescendingKey16OfBits(HalfBitsRoundNearest(x)) >> 5;
}

// Coarse(x) for x known not to be NaN: on the GPU the conversion alone, without
// the NaN pattern's select (the resident load's per-value histogram).
TOPK_HD uint32_t CoarseOfNumber(float x) {
#if defined(__CUDA_ARCH__)
  if (FloatBits(x) == 0x80000000u) x = 0.0f;  // -0.0 shares +0.0's bin
  return DescendingKey16OfBits(__half_as_ushort(__float2half_rn(x))) >> 5;
#else
  return Coarse(x);
#endif
}

// Coarse(a) and Coarse(b) for a and b not NaN, computed together: on the GPU
// one conversion to a half pair, and the pair's descending keys in two 32-bit
// operations (a byte permute spreads each half's sign over it, so one
// three-input logic op flips the non-negative halves' low 15 bits), where
// Coarse takes a conversion and its NaN and key selects per value (the
// short-row histogram pass is bound by its instructions a value).
// a + 0 is a, except that -0.0 becomes +0.0 (Coarse's canonicalisation).
TOPK_HD void CoarsePairOfNumbers(float a, float b, uint32_t* bin_a, uint32_t* bin_b) {
#if defined(__CUDA_ARCH__)
  const __half2 h = __floats2half2_rn(__fadd_rn(a, 0.0f), __fadd_rn(b, 0.0f));  // a: low half
  uint32_t bits;
  std::memcpy(&bits, &h, sizeof(bits));
  uint32_t sign;  // 0xFFFF over each negative half, 0 over the others
  asm("prmt.b32 %0, %1, 0, 0xBB99;" : "=r"(sign) : "r"(bits));
  const uint32_t keys = bits ^ (0x7FFF7FFFu & ~sign);
  *bin_a = (keys & 0xFFFFu) >> 5;
  *bin_b = keys >> 21;
#else
  *bin_a = Coarse(a);
  *bin_b = Coarse(b);
#endif
}

// Descending keys of +inf and -inf: every non-NaN key lies in between.
inline constexpr uint32_t kKeyOfPlusInf = 0x007FFFFFu;
inline constexpr uint32_t kKeyOfMinusInf = 0xFF800000u;
// Coarse bins of +inf and -inf: every non-NaN value's bin lies in between.
inline constexpr uint32_t kCoarseOfPlusInf = 31;
inline constexpr uint32_t kCoarseOfMinusInf = 2016;

// Smallest FP32 value whose coarse bin is <= b (b >= kCoarseOfPlusInf). A
// 32-step bisection over descending keys: coarse(value(key)) is non-decreasing
// in key, so find the largest key still in a bin <= b. When that key is +0.0's,
// -0.0 (the next key) shares the bin and is returned, so that `x >= t` keeps
// both zeros, as it must under numeric compare.
TOPK_HD float CoarseCutoff(uint32_t b) {
  if (b < kCoarseOfPlusInf) return BitsToFloat(0x7FC00000u);    // NaN: admits nothing
  if (b >= kCoarseOfMinusInf) return BitsToFloat(0xFF800000u);  // -inf: admits all
  uint32_t lo = kKeyOfPlusInf;                                  // coarse(value(lo)) <= b
  uint32_t hi = kKeyOfMinusInf;                                 // coarse(value(hi)) > b
  while (hi - lo > 1u) {
    const uint32_t mid = lo + (hi - lo) / 2u;
    if (Coarse(BitsToFloat(BitsOfDescendingKey(mid))) <= b) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return BitsToFloat(BitsOfDescendingKey(lo));
}

// The value of the non-negative FP16 pattern m (m <= 0x7C00; 0x7C00, +inf,
// gives 65536: where the finite patterns would go on).
TOPK_HD float PositiveHalfValue(uint32_t m) {
  const uint32_t e = m >> 10;
  return e == 0u ? static_cast<float>(m) * 0x1p-24f
                 : BitsToFloat(((e + 112u) << 23) | ((m & 0x3FFu) << 13));
}

// CoarseCutoff(b) without the search (the same bits for every b; keys_test
// and the device key-maps test compare them): a bin is 32 consecutive FP16
// patterns, so its edge is where FP32 values start rounding into it. Above
// zero (b < 1024) the bin's least pattern h is even, so the midpoint below h
// rounds up into the bin and is the cutoff; below zero the bin's largest
// magnitude m is odd, so the midpoint past m rounds away from the bin and the
// cutoff is the next value toward zero. Bin 1023's least pattern is +0: the
// cutoff is -0.0, as the search gives.
TOPK_HD float CoarseCutoffClosedForm(uint32_t b) {
  if (b < kCoarseOfPlusInf) return BitsToFloat(0x7FC00000u);
  if (b >= kCoarseOfMinusInf) return BitsToFloat(0xFF800000u);
  if (b < 1024u) {
    const uint32_t h = 0x7FE0u - 32u * b;
    if (h == 0u) return BitsToFloat(0x80000000u);
    return 0.5f * (PositiveHalfValue(h - 1u) + PositiveHalfValue(h));
  }
  const uint32_t m = 32u * b + 31u - 0x8000u;
  const float mid = 0.5f * (PositiveHalfValue(m) + PositiveHalfValue(m + 1u));
  return BitsToFloat((FloatBits(mid) | 0x80000000u) - 1u);
}

// ---------------------------------------------------------------------------
// 16-bit scores (docs/design.md section 1: BF16 and FP16 rows).
//
// Both types are sign-magnitude with the exponent above the mantissa, as FP32
// is, so one descending key serves both: Key16(h) orders raw patterns exactly
// as their FP32 widenings order, -0 canonicalised to +0. Widening to FP32 is
// exact for both types (BF16 is FP32's top half; every FP16 value, subnormals
// included, is an FP32 normal or zero).
//
// The coarse bin of a 16-bit value is the FP32 coarse map of the same value,
// so all three types share the 2048 bins, the infinities' bins and NaN's
// bins outside them. For FP16 that is simply Key16(h) >> 5 (sign, 5 exponent,
// 5 mantissa bits); for BF16 it rounds the widened value to FP16, which keeps
// 1/32-octave bins where scores live (a BF16-only map, Key16 >> 5, would
// have quarter-octave bins and admit about twice the candidates on indexer
// rows), at the price that BF16 magnitudes beyond FP16's range share the
// infinities' and zero's bins, as such FP32 values do.

TOPK_HD float Bf16BitsToFloat(uint16_t h) { return BitsToFloat(static_cast<uint32_t>(h) << 16); }

// Exact FP16 -> FP32 in integer arithmetic: the definition (the host has no
// portable FP16 type; tests/kernels/cuda checks the device's conversion against it
// on all 2^16 patterns).
TOPK_HD float Fp16BitsToFloatSoftware(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) return BitsToFloat(sign | 0x7F800000u | (mantissa << 13));  // inf, NaN
  if (exponent != 0) return BitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return BitsToFloat(sign);  // signed zero
  // Subnormal: shift the leading one into the implicit position.
  uint32_t e = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return BitsToFloat(sign | (e << 23) | ((mantissa & 0x3FFu) << 13));
}

// The same map; on the device one conversion instruction.
TOPK_HD float Fp16BitsToFloat(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  return Fp16BitsToFloatSoftware(h);
#endif
}

// FP32 -> BF16 bits, round to nearest even, overflow to infinity; NaN stays a
// (quiet) NaN of the same sign.
TOPK_HD uint16_t Bf16BitsRoundNearest(float f) {
  const uint32_t x = FloatBits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

// Exponent-all-ones with a nonzero fraction: 0x7F80 / 0x7C00 are the
// infinities' magnitudes.
TOPK_HD bool IsBf16Nan(uint16_t h) { return (h & 0x7FFFu) > 0x7F80u; }
TOPK_HD bool IsFp16Nan(uint16_t h) { return (h & 0x7FFFu) > 0x7C00u; }

// Inverse of DescendingKey16OfBits.
TOPK_HD uint16_t BitsOfDescendingKey16(uint32_t key) {
  return static_cast<uint16_t>((key & 0x8000u) ? key : (0x7FFFu - key));
}

TOPK_HD uint32_t Key16(uint16_t h) { return DescendingKey16OfBits(h == 0x8000u ? 0u : h); }

TOPK_HD uint32_t CoarseOfFp16(uint16_t h) { return Key16(h) >> 5; }
TOPK_HD uint32_t CoarseOfBf16(uint16_t h) { return Coarse(Bf16BitsToFloat(h)); }

// The smallest 16-bit pattern whose coarse bin is <= b, so that
// {h : widen(h) >= widen(cutoff)} == {h : coarse(h) <= b} for every non-NaN
// h. Below +inf's bin the cutoff is the NaN 0x7FFF (admits nothing); from
// -inf's bin on it is -inf (admits everything). FP16: the largest key of bin
// b is (b << 5) | 31 (when that is +0's key, -0 ties with it, as it must).
// BF16: the FP32 cutoff rounded up to the BF16 grid (toward +inf), since
// {x >= c} holds the same BF16 values as {x >= the smallest BF16 >= c}.
TOPK_HD uint16_t CoarseCutoffBitsFp16(uint32_t b) {
  if (b < kCoarseOfPlusInf) return 0x7FFFu;
  if (b >= kCoarseOfMinusInf) return 0xFC00u;
  return BitsOfDescendingKey16((b << 5) | 31u);
}
TOPK_HD uint16_t CoarseCutoffBitsBf16(uint32_t b) {
  if (b < kCoarseOfPlusInf) return 0x7FFFu;
  if (b >= kCoarseOfMinusInf) return 0xFF80u;
  const uint32_t u = FloatBits(CoarseCutoff(b));
  const bool exact = (u & 0xFFFFu) == 0;
  const bool positive = (u & 0x80000000u) == 0;
  return static_cast<uint16_t>((u >> 16) + (!exact && positive ? 1u : 0u));
}
// The same cutoffs widened to FP32 (NaN below +inf's bin).
TOPK_HD float CoarseCutoffBf16(uint32_t b) { return Bf16BitsToFloat(CoarseCutoffBitsBf16(b)); }
TOPK_HD float CoarseCutoffFp16(uint32_t b) { return Fp16BitsToFloat(CoarseCutoffBitsFp16(b)); }

// A two's-complement rank of a sign-magnitude 16-bit pattern: larger value,
// larger rank; -0 and +0 both rank 0. NaN patterns rank beyond the
// infinities, so callers mask NaN before comparing ranks. Lets the CPU admit
// 16-bit values with integer compares, 8 per SSE2 register, without widening.
TOPK_HD int32_t Rank16(uint16_t h) {
  const int32_t magnitude = h & 0x7FFF;
  return (h & 0x8000u) ? -magnitude : magnitude;
}

}  // namespace topk
