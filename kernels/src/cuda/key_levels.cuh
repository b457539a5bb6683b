// The digit layout of refinement over the 64-bit composite key, shared by
// the certification pass (which counts the level-0 digit while it compacts)
// and by refinement itself.
#pragma once

#include <cstdint>

namespace topk::cuda {

// Refinement levels over the 64-bit composite key (key32 << 32 | index). The
// admitted keys lie in [key(row max), key(cut)], so they share that interval's
// leading `top` key bits (CommonKeyBits); the key levels take the remaining
// 32 - top bits in 11-bit digits from the top (top = 0: 11/11/10), so level 0
// splits the candidates finely instead of keeping most of them in one
// quarter-octave bin. Deterministic mode adds 11/11/10 digits of the index,
// so ties at the K-th value go to the smallest indices by the same recurrence.
inline constexpr int kMaxCommonKeyBits = 21;  // keeps one full 11-bit key level
__device__ __forceinline__ int CommonKeyBits(uint32_t min_key, uint32_t max_key) {
  const int same = min_key == max_key ? 32 : __clz(min_key ^ max_key);
  return min(same, kMaxCommonKeyBits);
}
__device__ __forceinline__ int KeyLevels(int top) { return (32 - top + 10) / 11; }
// The key levels that hold at least one of the key's bits above its lowest
// `constant` bits (the same in every key of one sign; the sign is bit 31,
// resolved by level 0). At least level 0.
__device__ __forceinline__ int SignificantKeyLevels(int top, int constant) {
  const int bits = 32 - top - constant;
  return bits <= 0 ? 1 : min(KeyLevels(top), (bits + 10) / 11);
}
__device__ __forceinline__ int LevelBits(int j, int top) {
  const int r = 32 - top - 11 * j;  // key bits not yet resolved
  if (r > 0) return min(11, r);
  return j - KeyLevels(top) == 2 ? 10 : 11;
}
__device__ __forceinline__ int LevelShift(int j, int top) {
  const int r = 32 - top - 11 * j;
  if (r > 0) return 32 + r - min(11, r);
  const int i = j - KeyLevels(top);
  return i == 0 ? 21 : (i == 1 ? 10 : 0);
}
__device__ __forceinline__ uint32_t LevelDigit(uint64_t k64, int j, int top) {
  return static_cast<uint32_t>(k64 >> LevelShift(j, top)) & ((1u << LevelBits(j, top)) - 1u);
}
// Key bits below the level-0 digit (the 11 bits above them are the digit).
__device__ __forceinline__ int Level0Shift(int top) { return 21 - top; }

}  // namespace topk::cuda
