// Phase 3 of DESIGN section 2 on one CTA: exact radix refinement of the
// certified frontier, then the output (optional block sort) of the row.
#pragma once

#include <cstdint>

#include "block_primitives.cuh"
#include "candidates.cuh"
#include "topk/keys.h"

namespace topk::cuda {

// The CTA's shared state of the variant of kB threads (with the frontiers
// that follow it: about 104 KiB for two 512-thread CTAs per SM, under 56 KiB
// for four 256-thread CTAs).
template <int kB>
struct __align__(16) SharedState {
  static constexpr int kWarps = kB / 32;
  uint32_t hist[kCoarseBins];
  // Committed indices (K <= PersistentVariant<kB>::kOutput; larger K stage in
  // the CTA's global slice).
  uint32_t out[PersistentVariant<kB>::kOutput];
  BoundaryScratch scratch;
  uint32_t count;        // admitted candidates
  uint32_t spill;        // main pass: candidates in the CTA's global slice
  uint32_t neg_min_key;  // ~(smallest admitted key), 0: none (PublishMinKey)
  uint32_t max_key;      // register route: largest frontier key (atomicMax)
  int hist_top;          // CommonKeyBits the level-0 histogram was built for
  // Main pass: per-warp segment counts, then their exclusive prefix with the
  // shared total S at [kWarps] (CompactSegments).
  uint32_t warp_count[kWarps + 1];
  uint32_t out_count;  // committed outputs
  uint32_t next_count;
  uint32_t tie_count;
  uint32_t nan;
  float t0, t1;
  long long next_row;
};

// The frontiers' shared arrays follow the state in dynamic shared memory:
// A (indices, keys) x smem_candidates, then B x smem_frontier; at the end of a
// row the same bytes hold the output sort's 64-bit keys.
template <int kB>
__device__ __forceinline__ uint32_t* FrontierArena(SharedState<kB>& s) {
  return reinterpret_cast<uint32_t*>(&s + 1);
}

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

struct RefineOut {
  uint32_t* out;  // committed indices (shared or global staging)
  uint32_t* out_count;
};

// Refines the admitted set {x >= cut} of the row (count C, level-0 histogram
// for `top` in s.hist, stored in fa when C <= fa.capacity(); top > 0 only
// then) down to exactly K committed indices. fa may be a view with a short shared part (the
// compacted warp segments); it is also the store of levels 2 and 4, read and written through the
// same positions. A level whose frontier did not fit its store re-scans the row with the key-prefix
// filter. Returns the number of re-scanned levels.
template <int kB>
__device__ __noinline__ uint32_t Refine(SharedState<kB>& s, const float* __restrict__ row,
                                        uint32_t L, float cut, uint32_t C, const Frontier fa,
                                        const Frontier fb, uint32_t k, bool deterministic, int top,
                                        RefineOut ro) {
  const uint32_t tid = threadIdx.x;
  const int levels = KeyLevels(top) + (deterministic ? 3 : 0);
  uint32_t quota = k;
  // The key bits above level 0: shared by every admitted key.
  uint64_t prefix = top > 0 ? Key32(cut) >> (32 - top) : 0u;
  uint32_t fcount = C;
  bool stored = C <= fa.capacity();
  uint32_t rescans = stored ? 0u : 1u;
  bool flip = false;  // false: current frontier in A, next in B
  for (int j = 0; j < levels; ++j) {
    const Frontier cur = flip ? fb : fa;
    const Frontier nxt = flip ? fa : fb;
    // All 2048 bins: a narrower level's upper bins are zero.
    const Boundary bd = FindBoundary<kB>(s.hist, kCoarseBins, quota, s.scratch);
    const uint32_t b = bd.bin;
    const uint32_t kk = quota - bd.below;
    const bool take_all = bd.in_bin == kk;
    const bool last = j == levels - 1;
    const bool store_next = !take_all && !last && bd.in_bin <= nxt.capacity();
    for (uint32_t i = tid; i < kCoarseBins; i += kB) s.hist[i] = 0u;
    if (tid == 0) s.next_count = 0u, s.tie_count = 0u;
    __syncthreads();
    // Warp-uniform: every lane calls classify the same number of times, so
    // commits, retained entries and tie tickets reserve slots per warp.
    auto classify = [&](bool ok, uint32_t idx, uint32_t key) {
      const uint64_t k64 = (static_cast<uint64_t>(key) << 32) | idx;
      const uint32_t d = LevelDigit(k64, j, top);
      bool commit = ok && (d < b || (d == b && take_all));
      const bool eq = ok && d == b && !take_all;
      const bool keep = eq && !last;
      const bool tie = eq && last;  // equal keys (non-deterministic): any kk
      // last and store_next are block-uniform: skipped reservations skip
      // their votes for the whole warp.
      const uint32_t ticket = last ? WarpReserve(tie, &s.tie_count) : 0u;
      if (tie && ticket < kk) commit = true;
      const uint32_t slot = WarpReserve(commit, ro.out_count);
      if (commit) ro.out[slot] = idx;
      const uint32_t next = store_next ? WarpReserve(keep, &s.next_count) : 0u;
      if (keep) {
        if (store_next) nxt.Put(next, idx, key);
        atomicAdd(&s.hist[LevelDigit(k64, j + 1, top)], 1u);
      }
    };
    if (stored) {
      for (uint32_t base = 0; base < fcount; base += kB) {
        const uint32_t pos = base + tid;
        const bool ok = pos < fcount;
        uint32_t idx = 0, key = 0;
        if (ok) cur.Get(pos, idx, key);
        classify(ok, idx, key);
      }
    } else {
      const int above = LevelShift(j, top) + LevelBits(j, top);
      StreamRow<kB, 2>(row, L, [&](float4 v, uint32_t idx0, unsigned valid) {
        const unsigned m = AtLeastMask(v, cut) & valid;
        if (__any_sync(kFullMask, m != 0u)) {
#pragma unroll 1
          for (int q = 0; q < 4; ++q) {
            const bool in = (m >> q) & 1u;
            const uint32_t idx = idx0 + q;
            const uint32_t key = Key32(Lane(v, q));
            const uint64_t k64 = (static_cast<uint64_t>(key) << 32) | idx;
            classify(in && (j == 0 || (k64 >> above) == prefix), idx, key);
          }
        }
      });
    }
    __syncthreads();
    if (take_all || last) break;
    prefix = (prefix << LevelBits(j, top)) | b;
    quota = kk;
    fcount = bd.in_bin;
    stored = store_next;
    if (!stored) ++rescans;
    flip = !flip;
  }
  return rescans;
}

// Writes the row: count committed indices then kEmptySlot. Sorted: value
// descending, ties by index; deterministic unsorted: index ascending.
template <int kB>
__device__ __noinline__ void FinalizeRow(const float* __restrict__ row, const uint32_t* out,
                                         uint32_t count, int32_t* __restrict__ out_row, uint32_t k,
                                         bool sorted, bool deterministic, uint64_t* sort_buf) {
  const uint32_t tid = threadIdx.x;
  if (sorted || deterministic) {
    uint32_t n = 1;
    while (n < count) n <<= 1;
    for (uint32_t i = tid; i < n; i += kB) {
      uint64_t v = ~0ull;
      if (i < count) {
        const uint32_t idx = out[i];
        v = sorted ? ((static_cast<uint64_t>(Key32(row[idx])) << 32) | idx) : idx;
      }
      sort_buf[i] = v;
    }
    __syncthreads();
    BlockBitonicSort<kB>(sort_buf, n);
    for (uint32_t i = tid; i < k; i += kB) {
      out_row[i] = i < count ? static_cast<int32_t>(static_cast<uint32_t>(sort_buf[i])) : -1;
    }
  } else {
    for (uint32_t i = tid; i < k; i += kB) {
      out_row[i] = i < count ? static_cast<int32_t>(out[i]) : -1;
    }
  }
}

}  // namespace topk::cuda
