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
// (tests/cuda checks all 2^32 patterns on the device).
TOPK_HD uint16_t HalfBitsRoundNearest(float f) {
#if defined(__CUDA_ARCH__)
  const uint16_t h = __half_as_ushort(__float2half_rn(f));
  return IsNan(f) ? static_cast<uint16_t>(((FloatBits(f) >> 16) & 0x8000u) | 0x7E00u) : h;
#else
  return HalfBitsRoundNearestSoftware(f);
#endif
}

TOPK_HD uint32_t Coarse(float x) {
  if (FloatBits(x) == 0x80000000u) x = 0.0f;  // -0.0 shares +0.0's bin
  const uint32_t h = HalfBitsRoundNearest(x);
  const uint32_t descending16 = (h & 0x8000u) ? h : (0x7FFFu - h);
  return descending16 >> 5;
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

}  // namespace topk
