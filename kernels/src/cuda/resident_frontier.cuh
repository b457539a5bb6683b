// The resident route's frontier (decode_route.cu, step 2b): when the boundary
// coarse bin holds more values than rank 0's store (short rows at a large
// K / N, values crowded into one 1/32-octave bin), the ranks split that bin
// once more on chip instead of refining by re-reading the row: each counts the
// 11-bit digit of (key - the bin's first key), scaled to the bin's key range,
// of its keys in the bin, the counts are exchanged like the coarse histogram,
// and the digit holding the K-th value becomes the frontier; the values above
// it are committed as they are. The frontier is then a key interval
// [f_lo, f_hi]: rank 0 refines it alone, from its store, or (ties, a flood of
// equal values) by re-scanning the row for the values in its band.
#pragma once

#include <cstdint>

#include "block_primitives.cuh"
#include "frontier.cuh"
#include "key_levels.cuh"
#include "score_row.cuh"
#include "topk/keys.h"

namespace topk::cuda {

// The frontier's key interval and what it leaves: committed values above it
// (key < f_lo), entries in it, the key bits its keys share, and its band as
// values ({cut <= x < hi}; hi NaN: no value above it).
struct ResidentFrontier {
  uint32_t f_lo, f_hi;
  uint32_t committed, count;
  int top;
  float cut, hi;
};

// The value whose descending key is key (NaN for keys above +inf's).
__device__ __forceinline__ float ValueOfKey(uint32_t key) {
  return BitsToFloat(BitsOfDescendingKey(key));
}

// The frontier [f_lo, f_hi] with `committed` values above it and `count` in it.
__device__ __forceinline__ ResidentFrontier MakeResidentFrontier(uint32_t f_lo, uint32_t f_hi,
                                                                 uint32_t committed,
                                                                 uint32_t count) {
  ResidentFrontier f;
  f.f_lo = f_lo, f.f_hi = f_hi, f.committed = committed, f.count = count;
  f.top = CommonKeyBits(f_lo, f_hi);
  f.cut = ValueOfKey(f_hi);
  f.hi = f_lo > kKeyOfPlusInf ? ValueOfKey(f_lo - 1u) : BitsToFloat(0x7FC00000u);
  return f;
}

// The keys of coarse bin b: (the key of CoarseCutoff(b - 1), the key of
// CoarseCutoff(b) = cut_key]; the +inf bin holds +inf alone.
__device__ __forceinline__ uint32_t BinFirstKey(uint32_t b, float cutoff_above) {
  return b <= kCoarseOfPlusInf ? kKeyOfPlusInf : Key32(cutoff_above) + 1u;
}
// The shift that maps the bin's key range onto 11-bit digits.
__device__ __forceinline__ int BinDigitShift(uint32_t first_key, uint32_t last_key) {
  const uint32_t span = last_key - first_key;
  return span == 0u ? 0 : max(0, 32 - __clz(span) - 11);
}

// Counts the digit (key - first) >> shift of keys[0, len) in [first, last]
// into hist (zeroed, with a barrier since). Every thread calls it.
template <int kB>
__device__ __noinline__ void CountBinDigits(const uint32_t* keys, uint32_t len, uint32_t first,
                                            uint32_t last, int shift, uint32_t* hist) {
  for (uint32_t base = 0; base < len; base += kB) {
    const uint32_t i = base + threadIdx.x;
    const uint32_t key = i < len ? keys[i] : 0u;
    const bool in = i < len && key >= first && key <= last;
    if (!__any_sync(kFullMask, in)) continue;
    AggregatedCount(in, (key - first) >> shift, hist);
  }
}

// The level-0 digit histogram of the band {cut <= x < hi} by re-scanning the
// row: a frontier larger than rank 0's store. Synchronises on exit.
template <int kB, typename Row>
__device__ __noinline__ void RescanBandDigitHist(const Row row, uint32_t L, float cut, float hi,
                                                 int shift0, uint32_t* hist) {
  StreamRowAtLeast<kB, 2>(row, L, cut, [&](float4 v, uint32_t, unsigned valid) {
    const unsigned m = AtLeastMask(v, cut) & ~AtLeastMask(v, hi) & valid;
    if (__any_sync(kFullMask, m != 0u)) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        AggregatedCount((m >> j) & 1u, (Key32(Lane(v, j)) >> shift0) & 0x7FFu, hist);
      }
    }
  });
  __syncthreads();
}

}  // namespace topk::cuda
