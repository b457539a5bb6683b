// The candidate store every phase after the proposal appends to and reads
// from, and the warp-level primitives that append to it: lane masks of a
// float4, aggregated histogram counts, warp prefix sums and slot reservation.
#pragma once

#include <cstdint>

#include "block_primitives.cuh"
#include "topk/keys.h"

namespace topk::cuda {

// A frontier store: a shared-memory part, then the CTA's global overflow
// slice. Entries past the capacity are dropped; the caller sees the count
// exceed capacity() and refines that level by re-scanning the row instead.
struct Frontier {
  uint32_t* s_idx;
  uint32_t* s_key;
  uint32_t s_cap;
  uint32_t* g_idx;
  uint32_t* g_key;
  uint32_t g_cap;

  __device__ __forceinline__ uint32_t capacity() const { return s_cap + g_cap; }
  __device__ __forceinline__ void Put(uint32_t pos, uint32_t idx, uint32_t key) const {
    if (pos < s_cap) {
      s_idx[pos] = idx;
      s_key[pos] = key;
    } else if (pos - s_cap < g_cap) {
      g_idx[pos - s_cap] = idx;
      g_key[pos - s_cap] = key;
    }
  }
  __device__ __forceinline__ void Get(uint32_t pos, uint32_t& idx, uint32_t& key) const {
    if (pos < s_cap) {
      idx = s_idx[pos];
      key = s_key[pos];
    } else {
      // L1-bypassing: KV-split finishers read entries other CTAs wrote.
      idx = __ldcg(g_idx + (pos - s_cap));
      key = __ldcg(g_key + (pos - s_cap));
    }
  }
};

__device__ __forceinline__ unsigned NanMask(float4 v) {
  return (v.x != v.x ? 1u : 0u) | (v.y != v.y ? 2u : 0u) | (v.z != v.z ? 4u : 0u) |
         (v.w != v.w ? 8u : 0u);
}

__device__ __forceinline__ unsigned AtLeastMask(float4 v, float t) {
  return (v.x >= t ? 1u : 0u) | (v.y >= t ? 2u : 0u) | (v.z >= t ? 4u : 0u) | (v.w >= t ? 8u : 0u);
}

__device__ __forceinline__ float Lane(float4 v, int j) {
  return j == 0 ? v.x : (j == 1 ? v.y : (j == 2 ? v.z : v.w));
}

// Adds one to hist[bin] for every lane with ok. A warp whose counted lanes
// share one bin (candidates crowd into one or two digit-0 bins; constant or
// one-bin rows) adds once, found with two redux instructions; other warps add
// per lane (match.any aggregation of every sample made the proposal slower,
// bench/NOTES.md). Every lane of the warp must call it.
__device__ __forceinline__ void AggregatedCount(bool ok, uint32_t bin, uint32_t* hist) {
  const unsigned act = __ballot_sync(kFullMask, ok);
  if (act == 0u) return;
  const uint32_t lo = __reduce_min_sync(kFullMask, ok ? bin : 0xFFFFFFFFu);
  const uint32_t hi = __reduce_max_sync(kFullMask, ok ? bin : 0u);
  if (lo == hi) {
    if ((threadIdx.x & 31) == static_cast<uint32_t>(__ffs(act) - 1)) {
      atomicAdd(&hist[lo], static_cast<uint32_t>(__popc(act)));
    }
  } else if (ok) {
    atomicAdd(&hist[bin], 1u);
  }
}

// Warp prefix of the per-lane counts cnt (0..4): three bit-planes by ballot.
// Returns the lane's exclusive offset; *total gets the warp's sum.
__device__ __forceinline__ uint32_t WarpPrefix4(uint32_t cnt, uint32_t* total) {
  const int lane = threadIdx.x & 31;
  const unsigned p0 = __ballot_sync(kFullMask, cnt & 1u);
  const unsigned p1 = __ballot_sync(kFullMask, cnt & 2u);
  const unsigned p2 = __ballot_sync(kFullMask, cnt & 4u);
  const unsigned lt = (1u << lane) - 1u;
  *total = __popc(p0) + 2u * __popc(p1) + 4u * __popc(p2);
  return __popc(p0 & lt) + 2u * __popc(p1 & lt) + 4u * __popc(p2 & lt);
}

// Warp-aggregated append of the admitted lanes of v (bit j of m: v[j]
// admitted) to a shared-count frontier: one atomic per warp reserves the
// slots. Used by the band pass and the KV-split segments (cold or
// cross-CTA); the main pass uses AppendQuadToSegment.
__device__ __forceinline__ void AppendQuad(float4 v, uint32_t idx0, unsigned m, const Frontier& f,
                                           uint32_t* count, uint32_t& min_key) {
  uint32_t total;
  const uint32_t excl = WarpPrefix4(__popc(m), &total);
  uint32_t base = 0;
  if ((threadIdx.x & 31) == 0) base = atomicAdd(count, total);
  uint32_t pos = __shfl_sync(kFullMask, base, 0) + excl;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if ((m >> j) & 1u) {
      const uint32_t key = Key32(Lane(v, j));
      min_key = min(min_key, key);
      f.Put(pos++, idx0 + j, key);
    }
  }
}

// Publishes the smallest admitted key of the warp (the largest value) as
// atomicMax of its complement, so a zeroed word means "none yet". Every lane
// of the warp must call it.
__device__ __forceinline__ void PublishMinKey(uint32_t min_key, uint32_t* neg_min_key) {
  const uint32_t w = __reduce_min_sync(kFullMask, min_key);
  if ((threadIdx.x & 31) == 0 && w != 0xFFFFFFFFu) atomicMax(neg_min_key, ~w);
}

// The main pass's append: each warp owns a private segment of the shared
// store (seg entries at warp * seg) and a warp-uniform register cursor n, so
// the hot loop has no atomic and no return latency. A batch that does not fit
// the segment goes to the CTA's global slice (one atomic on *spill; entries
// past the slice are dropped and the count shows it).
__device__ __forceinline__ void AppendQuadToSegment(float4 v, uint32_t idx0, unsigned m,
                                                    const Frontier& f, uint32_t seg, uint32_t& n,
                                                    uint32_t* spill, uint32_t& min_key) {
  uint32_t total;
  const uint32_t excl = WarpPrefix4(__popc(m), &total);
  const uint32_t warp = threadIdx.x >> 5;
  if (n + total <= seg) {
    uint32_t pos = warp * seg + n + excl;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if ((m >> j) & 1u) {
        const uint32_t key = Key32(Lane(v, j));
        min_key = min(min_key, key);
        f.s_idx[pos] = idx0 + j;
        f.s_key[pos] = key;
        ++pos;
      }
    }
    n += total;
    return;
  }
  uint32_t base = 0;
  if ((threadIdx.x & 31) == 0) base = atomicAdd(spill, total);
  uint32_t pos = __shfl_sync(kFullMask, base, 0) + excl;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if ((m >> j) & 1u) {
      const uint32_t key = Key32(Lane(v, j));
      min_key = min(min_key, key);
      if (pos < f.g_cap) {
        f.g_idx[pos] = idx0 + j;
        f.g_key[pos] = key;
      }
      ++pos;
    }
  }
}

}  // namespace topk::cuda
