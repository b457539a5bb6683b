// Refinement (docs/design.md section 2, phase 3) on one CTA: the exact radix
// refinement of the certified candidates down to the K committed indices,
// digit by digit over the 64-bit composite key, and the level-0 digit
// histograms it starts from (from the stored candidates, or by re-scanning
// the row when they did not fit).
#pragma once

#include <cstdint>
#include <type_traits>

#include "block_primitives.cuh"
#include "cta_state.cuh"
#include "frontier.cuh"
#include "key_levels.cuh"
#include "topk/keys.h"

namespace topk::cuda {

// The band bound of callers whose admitted set is {x >= cut}: NaN, which no
// x reaches (x >= NaN is false).
__device__ __forceinline__ float NoUpperBound() { return BitsToFloat(0x7FC00000u); }

struct RefineOut {
  uint32_t* out;  // committed indices (shared or global staging)
  uint32_t* out_count;
};

// Counts the level-0 digit (the 11 key bits above bit shift0) of the
// frontier entries [from, to) of f into hist (AggregatedCount). Synchronises
// on exit.
template <int kB>
__device__ __noinline__ void FrontierDigitHist(const Frontier f, uint32_t from, uint32_t to,
                                               int shift0, uint32_t* hist) {
  for (uint32_t base = from; base < to; base += kB) {
    const uint32_t pos = base + threadIdx.x;
    const bool ok = pos < to;
    uint32_t idx = 0, key = 0;
    if (ok) f.Get(pos, idx, key);
    AggregatedCount(ok, (key >> shift0) & 0x7FFu, hist);
  }
  __syncthreads();
}

// The leading-digit histogram of {x >= cut} by re-scanning the row: for a
// frontier larger than its stores (constant / one-bin rows). Synchronises on
// exit.
template <int kB, typename Row>
__device__ __noinline__ void RescanDigitHist(const Row row, uint32_t L, float cut, uint32_t* hist) {
  StreamRowAtLeast<kB, 2>(row, L, cut, [&](float4 v, uint32_t, unsigned valid) {
    const unsigned m = AtLeastMask(v, cut) & valid;
    if (__any_sync(kFullMask, m != 0u)) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        AggregatedCount((m >> j) & 1u, KeyDigit0(Key32(Lane(v, j))), hist);
      }
    }
  });
  __syncthreads();
}

// Commits the kk smallest composite keys (key32 << 32 | index) of the n <= kB
// entries [0, n) of f: each thread ranks one entry against all n (the
// composite keys are distinct, so the ranks are a permutation). The kk
// smallest is what the remaining digit levels would select in deterministic
// mode (digits are slices of the composite key from the top), and a valid
// choice among equal keys otherwise. Every thread calls it; no barrier.
template <int kB>
__device__ __forceinline__ void CommitByRank(const Frontier f, uint32_t n, uint32_t kk,
                                             RefineOut ro) {
  const uint32_t tid = threadIdx.x;
  if ((tid & ~31u) >= n) return;  // warp-uniform: whole warps past the entries
  uint32_t my_idx = 0, my_key = 0;
  if (tid < n) f.Get(tid, my_idx, my_key);
  const uint64_t mine = (static_cast<uint64_t>(my_key) << 32) | my_idx;
  uint32_t rank = 0;
#pragma unroll 4
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t idx, key;
    f.Get(i, idx, key);  // the same entry in every lane: a broadcast
    rank += ((static_cast<uint64_t>(key) << 32) | idx) < mine ? 1u : 0u;
  }
  const bool commit = tid < n && rank < kk;
  const uint32_t slot = WarpReserve(commit, ro.out_count);
  if (commit) ro.out[slot] = my_idx;
}

// Refines the admitted set {cut <= x < hi} of the row (hi NaN: no upper
// bound; count C, level-0 histogram for `top` in s.hist, stored in fa when
// C <= fa.capacity()) down to exactly k committed indices. The key bits above
// level 0 are the `top` leading bits of Key32(cut), which every admitted key
// shares. fa may be a view with a short shared part (the compacted warp
// segments); it is also the store of levels 2 and 4, read and written through
// the same positions. A level whose frontier did not fit its store re-scans
// the row with the band and key-prefix filters (the band matters to callers
// that committed the values above hi themselves: a key above the band can
// share a level's prefix). A boundary bin of at most kB entries before the
// last level is stored and finished by rank (CommitByRank) instead of by the
// remaining levels, each of which costs a 2048-bin scan and its barriers
// however few entries it holds. Returns the number of re-scanned levels. State:
// any CTA state with hist, scratch, next_count and tie_count (SharedState, or
// the short-row route's).
//
// FrontierArg: how the two stores arrive. By value (the default) for
// frontiers the caller built in registers; by reference (const Frontier&)
// for frontiers kept in shared memory (SelectRow's): their fields are then
// read from there when used, instead of holding 20 registers through every
// level, which under the 64-register bound the phase would spill to local
// memory (an L2 round trip per reload: the L1 is what the shared-memory
// carveout leaves).
template <int kB, typename State, typename Row, typename FrontierArg = const Frontier>
__device__ __noinline__ uint32_t Refine(State& s, const Row row, uint32_t L, float cut, float hi,
                                        uint32_t C, FrontierArg fa, FrontierArg fb, uint32_t k,
                                        bool deterministic, int top, RefineOut ro) {
  // The level's current and next stores: references into shared memory, or
  // copies of by-value arguments (a reference to one of those would put them
  // in local memory).
  using Held =
      std::conditional_t<std::is_reference_v<FrontierArg>, const Frontier&, const Frontier>;
  const uint32_t tid = threadIdx.x;
  // Deterministic: every key level, then the index levels. Otherwise only
  // the key levels that hold variable bits (16-bit rows' widened keys end in
  // sign-fixed bits): equal digits on the last one are equal keys, any of
  // which may take the remaining slots.
  const int levels =
      deterministic ? KeyLevels(top) + 3 : SignificantKeyLevels(top, row.ConstantKeyBits());
  uint32_t quota = k;
  // The key bits above level 0: shared by every admitted key.
  uint64_t prefix = top > 0 ? Key32(cut) >> (32 - top) : 0u;
  uint32_t fcount = C;
  bool stored = C <= fa.capacity();
  uint32_t rescans = stored ? 0u : 1u;
  bool flip = false;  // false: current frontier in A, next in B
  for (int j = 0; j < levels; ++j) {
    Held cur = flip ? fb : fa;
    Held nxt = flip ? fa : fb;
    // All 2048 bins: a narrower level's upper bins are zero.
    const Boundary bd = FindBoundary<kB>(s.hist, kCoarseBins, quota, s.scratch);
    const uint32_t b = bd.bin;
    const uint32_t kk = quota - bd.below;
    const bool take_all = bd.in_bin == kk;
    const bool last = j == levels - 1;
    const bool store_next = !take_all && !last && bd.in_bin <= nxt.capacity();
    // Few entries left: store them and rank them (no next histogram).
    const bool finish = store_next && bd.in_bin <= static_cast<uint32_t>(kB);
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
        if (!finish) atomicAdd(&s.hist[LevelDigit(k64, j + 1, top)], 1u);
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
      StreamRowAtLeast<kB, 2>(row, L, cut, [&](float4 v, uint32_t idx0, unsigned valid) {
        // x >= NaN is false: no upper bound unless hi is a number.
        const unsigned m = AtLeastMask(v, cut) & ~AtLeastMask(v, hi) & valid;
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
    if (finish) {
      CommitByRank<kB>(nxt, bd.in_bin, kk, ro);
      __syncthreads();
      break;
    }
    prefix = (prefix << LevelBits(j, top)) | b;
    quota = kk;
    fcount = bd.in_bin;
    stored = store_next;
    if (!stored) ++rescans;
    flip = !flip;
  }
  return rescans;
}

// Completes the level-0 histogram of the C admitted values x >= cut and
// returns the common key bits it is built for. Stored: the global entries
// are added (the shared part was counted by CompactSegments), or, when the
// band moved the cut (other common bits), every entry is recounted. Larger
// than its stores: a re-scan of the row, top = 0.
template <int kB, typename Row>
__device__ __noinline__ int FinishLevel0Hist(SharedState<kB>& s, const Row row, uint32_t L,
                                             float cut, const Frontier& view, uint32_t C) {
  if (C > view.capacity()) {
    ClearHist(s);
    __syncthreads();
    RescanDigitHist<kB>(row, L, cut, s.hist);
    return 0;
  }
  const int top = CommonKeyBits(~s.neg_min_key, Key32(cut));
  if (top == s.hist_top) {
    FrontierDigitHist<kB>(view, view.s_cap, C, Level0Shift(top), s.hist);
  } else {
    ClearHist(s);
    __syncthreads();
    FrontierDigitHist<kB>(view, 0, C, Level0Shift(top), s.hist);
  }
  return top;
}

}  // namespace topk::cuda
