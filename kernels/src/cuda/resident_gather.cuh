// The resident route's gather (decode_route.cu, step 3): every rank reads its
// keys back from shared memory and sends rank 0 what it needs through
// distributed shared memory: the indices of the values above the frontier
// (committed: key < f_lo) into rank 0's output, and the frontier's entries
// (f_lo <= key <= f_hi) into rank 0's frontier store with their level-0
// digits counted into rank 0's histogram, so rank 0 refines the frontier alone
// with everything on chip. One remote atomic per rank and destination
// reserves its slots (a count pass first): a remote atomic's round trip per
// warp and step would be the phase's latency.
#pragma once

#include <cstdint>

#include "block_primitives.cuh"
#include "frontier.cuh"
#include "resident_state.cuh"

namespace topk::cuda {

// Where the gather sends a rank's keys (rank 0's, remote for the others).
struct LeaderStores {
  uint32_t* out;        // committed indices
  uint32_t* out_count;  // their reservation counter
  Frontier frontier;    // the frontier's (index, key) entries
  uint32_t* f_count;    // their reservation counter
  uint32_t* hist;       // the frontier's level-0 digits (key >> shift0, 11 bits)
  int shift0;
  bool push_frontier;  // false: only the committed indices (rank 0 re-scans)
};

// Calls f(i, keys[i]) for this thread's keys of keys[0, len), the same keys
// in the same order on every call. kGrouped: four consecutive keys a step
// from one 16-byte shared load over the 16-byte-aligned body, the ragged
// ends (under four keys each) one to a thread (the 1024-thread CTA's
// segments of thousands of keys: a quarter of the loads; on a few thousand
// keys a rank the ends' extra key on a few threads sets the barrier after
// it); else one key a step, kB apart. Not warp-uniform: f must not vote.
template <int kB, bool kGrouped, typename F>
__device__ __forceinline__ void VisitKeys(const uint32_t* keys, uint32_t len, F&& f) {
  const uint32_t tid = threadIdx.x;
  if constexpr (kGrouped) {
    const uint32_t misalign = static_cast<uint32_t>(__cvta_generic_to_shared(keys)) & 15u;
    const uint32_t a0 = min(len, ((16u - misalign) & 15u) / 4u);
    const uint32_t a1 = a0 + (len - a0) / 4u * 4u;
    for (uint32_t i = a0 + 4u * tid; i < a1; i += 4u * kB) {
      const uint4 w = *reinterpret_cast<const uint4*>(keys + i);
      f(i, w.x);
      f(i + 1u, w.y);
      f(i + 2u, w.z);
      f(i + 3u, w.w);
    }
    if (tid < a0 + (len - a1)) {
      const uint32_t i = tid < a0 ? tid : a1 + (tid - a0);
      f(i, keys[i]);
    }
  } else {
    for (uint32_t i = tid; i < len; i += kB) f(i, keys[i]);
  }
}

// A thread's first slots in the gather's two destinations.
struct GatherSlots {
  uint32_t out_pos;  // committed indices
  uint32_t f_pos;    // frontier entries
};

// Counts the thread's keys of keys[0, len) (VisitKeys<kB, kGrouped>) that are
// committed (key < f_lo) and, with count_frontier, in the frontier [f_lo,
// f_hi]; reserves the CTA's committed slots with one atomic on out_count, and
// its frontier slots with one on f_count, or (f_count == nullptr) from the
// shared word *f_base, written before the call (its first barrier publishes
// it). Returns the thread's first slots: the write pass, visiting the keys in
// the same order (VisitKeys with the same kGrouped), advances them. scratch:
// 2 (kB / 32 + 1) words of the CTA's shared memory. Every thread of the CTA
// calls it.
template <int kB, bool kGrouped = false>
__device__ __forceinline__ GatherSlots ReserveGatherSlots(const uint32_t* keys, uint32_t len,
                                                          uint32_t f_lo, uint32_t f_hi,
                                                          bool count_frontier, uint32_t* out_count,
                                                          uint32_t* f_count, const uint32_t* f_base,
                                                          uint32_t* scratch) {
  constexpr int kWarps = kB / 32;
  const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // Two counts in one word each: committed in the low half, frontier high.
  uint32_t n = 0;
  VisitKeys<kB, kGrouped>(keys, len, [&](uint32_t, uint32_t key) {
    n += key < f_lo ? 1u : (key <= f_hi && count_frontier ? 0x10000u : 0u);
  });
  uint32_t incl = n;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t y = __shfl_up_sync(kFullMask, incl, o);
    if (lane >= o) incl += y;
  }
  if (lane == 31) scratch[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    const uint32_t w = lane < kWarps ? scratch[lane] : 0u;
    uint32_t wi = w;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const uint32_t y = __shfl_up_sync(kFullMask, wi, o);
      if (lane >= o) wi += y;
    }
    // The CTA's totals reserve its slots (lane kWarps - 1 holds them).
    uint32_t out_base = 0, front_base = 0;
    if (lane == kWarps - 1) {
      if (wi & 0xFFFFu) out_base = atomicAdd(out_count, wi & 0xFFFFu);
      if (f_count == nullptr) {
        front_base = *f_base;
      } else if (wi >> 16) {
        front_base = atomicAdd(f_count, wi >> 16);
      }
    }
    out_base = __shfl_sync(kFullMask, out_base, kWarps - 1);
    front_base = __shfl_sync(kFullMask, front_base, kWarps - 1);
    const uint32_t excl = wi - w;
    if (lane < kWarps) {
      scratch[lane] = out_base + (excl & 0xFFFFu);
      scratch[kWarps + 1 + lane] = front_base + (excl >> 16);
    }
  }
  __syncthreads();
  const uint32_t before = incl - n;
  return GatherSlots{scratch[warp] + (before & 0xFFFFu),
                     scratch[kWarps + 1 + warp] + (before >> 16)};
}

// The keys [0, len) of the rank whose segment starts at row index beg. The
// caller made sure the committed indices fit the output and, with
// push_frontier, the frontier fits its store. scratch: 2 (kB / 32 + 1) words
// of the CTA's shared memory. Every thread of the CTA calls it.
template <int kB>
__device__ __noinline__ void GatherToLeader(const uint32_t* keys, uint32_t len, uint32_t beg,
                                            uint32_t f_lo, uint32_t f_hi, const LeaderStores& to,
                                            uint32_t* scratch) {
  const uint32_t tid = threadIdx.x;
  const GatherSlots slots = ReserveGatherSlots<kB>(keys, len, f_lo, f_hi, to.push_frontier,
                                                   to.out_count, to.f_count, nullptr, scratch);
  uint32_t out_pos = slots.out_pos;
  uint32_t f_pos = slots.f_pos;
  for (uint32_t base = 0; base < len; base += kB) {
    const uint32_t i = base + tid;
    const uint32_t key = i < len ? keys[i] : 0xFFFFFFFFu;
    const bool commit = i < len && key < f_lo;
    const bool front = i < len && !commit && key <= f_hi && to.push_frontier;
    if (!__any_sync(kFullMask, commit || front)) continue;
    if (commit) to.out[out_pos++] = beg + i;
    if (front) to.frontier.Put(f_pos++, beg + i, key);
    AggregatedCount(front, (key >> to.shift0) & 0x7FFu, to.hist);
  }
}

}  // namespace topk::cuda
