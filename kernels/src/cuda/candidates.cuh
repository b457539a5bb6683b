// Phases 1 and 2 of DESIGN section 2 on one CTA: the strided view's coarse
// histogram (proposal), the fused certification/candidate pass, and the full
// coarse histogram of exact recovery.
#pragma once

#include <cstdint>

#include "block_primitives.cuh"
#include "topk/algorithm_constants.h"
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
// bench/NOTES.md, GPU round 2). Every lane of the warp must call it.
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

// Phase 2, main pass: one pass over the valid row admitting x >= lo into the
// warp segments of f (seg = f.s_cap / kWarps entries each) and f's global
// slice, and flagging NaN. The compare is on raw floats: the cutoffs come
// from CoarseCutoff, so the admitted set is exactly a union of coarse bins.
// No digit histogram here: CompactSegments builds it from the stored keys.
// Writes each warp's segment count to warp_count[warp], the global entries'
// count to *spill and the smallest admitted key to *neg_min_key
// (PublishMinKey; both zeroed by the caller). kB: threads per CTA.
template <int kB, int kUnroll>
__device__ __noinline__ void AdmitToSegments(const float* __restrict__ row, uint32_t L, float lo,
                                             const Frontier f, uint32_t* warp_count,
                                             uint32_t* spill, uint32_t* neg_min_key,
                                             uint32_t* nan_flag, bool prefetch) {
  unsigned nan = 0;
  uint32_t n = 0;  // warp-uniform
  uint32_t min_key = 0xFFFFFFFFu;
  const uint32_t seg = f.s_cap / (kB / 32);
  StreamRow<kB, kUnroll>(
      row, L,
      [&](float4 v, uint32_t idx0, unsigned valid) {
        const unsigned m = AtLeastMask(v, lo) & valid;
        nan |= NanMask(v) & valid;
        if (__any_sync(kFullMask, m != 0)) {
          AppendQuadToSegment(v, idx0, m, f, seg, n, spill, min_key);
        }
      },
      prefetch);
  if ((threadIdx.x & 31) == 0) warp_count[threadIdx.x >> 5] = n;
  PublishMinKey(min_key, neg_min_key);
  if (nan) *nan_flag = 1u;
}

// Moves the warp segments [w * seg, w * seg + n_w) of f's shared part to its
// front ([0, S)), counting the level-0 digit of every entry, the 11 key bits
// above bit shift0 (see Level0Shift), into hist (AggregatedCount).
// warp_count holds kWarps + 1 entries: the counts n_w on entry, their
// exclusive prefix (and S at [kWarps]) on exit. Every entry is read before any
// is written (entries only move down). Returns S. Synchronises on entry and
// exit. kB: threads per CTA; f.s_cap <= kCap, kCap a multiple of 2 * kB.
template <int kB, int kCap>
__device__ __noinline__ uint32_t CompactSegments(const Frontier f, uint32_t* warp_count, int shift0,
                                                 uint32_t* hist) {
  constexpr int kWarps = kB / 32;
  constexpr int kMaxPerThread = kCap / kB;
  static_assert(kMaxPerThread % 2 == 0 && kMaxPerThread * kB == kCap, "two equal rounds");
  const uint32_t seg = f.s_cap / kWarps;
  __syncthreads();
  if (threadIdx.x < 32) {
    const uint32_t lane = threadIdx.x;
    const uint32_t own = lane < kWarps ? warp_count[lane] : 0u;
    uint32_t incl = own;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const uint32_t y = __shfl_up_sync(kFullMask, incl, o);
      if (lane >= o) incl += y;
    }
    __syncwarp();
    if (lane < kWarps) warp_count[lane] = incl - own;
    if (lane == kWarps - 1) warp_count[kWarps] = incl;
  }
  __syncthreads();
  // Rounds of kPerRound slots per thread bound the registers; a round's
  // writes land below its own slots and on positions no other slot maps to,
  // so reading a round before writing it is enough.
  constexpr int kPerRound = kMaxPerThread / 2;
  for (int round = 0; round < kMaxPerThread / kPerRound; ++round) {
    uint32_t idx[kPerRound], key[kPerRound], dst[kPerRound];
#pragma unroll
    for (int r = 0; r < kPerRound; ++r) {
      const uint32_t slot = threadIdx.x + (round * kPerRound + r) * kB;
      const uint32_t w = min(slot / seg, static_cast<uint32_t>(kWarps - 1));
      const uint32_t off = slot - w * seg;
      const uint32_t base = warp_count[w];
      const bool ok = slot < f.s_cap && base + off < warp_count[w + 1];
      dst[r] = ok ? base + off : 0xFFFFFFFFu;
      idx[r] = ok ? f.s_idx[slot] : 0u;
      key[r] = ok ? f.s_key[slot] : 0u;
      AggregatedCount(ok, (key[r] >> shift0) & 0x7FFu, hist);
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kPerRound; ++r) {
      if (dst[r] != 0xFFFFFFFFu) {
        f.s_idx[dst[r]] = idx[r];
        f.s_key[dst[r]] = key[r];
      }
    }
    __syncthreads();
  }
  const uint32_t total = warp_count[kWarps];
  __syncthreads();
  return total;
}

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
template <int kB>
__device__ __noinline__ void RescanDigitHist(const float* __restrict__ row, uint32_t L, float cut,
                                             uint32_t* hist) {
  StreamRow<kB, 2>(row, L, [&](float4 v, uint32_t, unsigned valid) {
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

// Phase 2, appending passes: admits x >= lo (kBand: lo <= x < hi) and
// appends to f through the shared count (the band pass after an underfilled
// main pass; kSegment: a KV-split segment CTA appending to its row's buffer).
// Also publishes the smallest admitted key to *neg_min_key (PublishMinKey).
template <int kB, bool kBand, bool kSegment = false, int kUnroll = 4>
__device__ __noinline__ void AdmitPass(const float* __restrict__ row, uint32_t L, float lo,
                                       float hi, const Frontier f, uint32_t* count,
                                       uint32_t* neg_min_key, uint32_t* nan_flag, bool prefetch,
                                       uint32_t idx_base = 0) {
  unsigned nan = 0;
  uint32_t min_key = 0xFFFFFFFFu;
  StreamRow<kB, kUnroll>(
      row, L,
      [&](float4 v, uint32_t idx0, unsigned valid) {
        unsigned m = AtLeastMask(v, lo);
        if (kBand) m &= ~AtLeastMask(v, hi);
        m &= valid;
        nan |= NanMask(v) & valid;
        if (__any_sync(kFullMask, m != 0))
          AppendQuad(v, kSegment ? idx_base + idx0 : idx0, m, f, count, min_key);
      },
      prefetch);
  PublishMinKey(min_key, neg_min_key);
  if (nan) *nan_flag = 1u;
}

// Phase 1: the coarse histogram of the row's view. View: groups of `run`
// consecutive positions starting at run * a_r in every block of run * s
// positions (run == 1 is the paper's i = a_r mod s); about L / s samples.
// 16 loads in flight per thread (a 1M row's 16K samples in two round trips);
// plain shared atomics: the samples spread over many bins, and any warp-level
// aggregation measured slower here (bench/NOTES.md, GPU round 2).
template <int kB>
__device__ __noinline__ void SampleHistogram(const float* __restrict__ row, uint32_t L,
                                             int64_t row_id, int stride, int log2_run,
                                             uint32_t* hist) {
  const uint32_t run = 1u << log2_run;
  const uint32_t group = static_cast<uint32_t>(stride) << log2_run;
  const uint32_t offset = static_cast<uint32_t>(SamplePhase(row_id, stride)) << log2_run;
  const uint32_t total = (L + group - 1) / group * run;
  constexpr int kUnroll = 16;
  for (uint32_t t0 = 0; t0 < total; t0 += kB * kUnroll) {
    float x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t t = t0 + u * kB + threadIdx.x;
      const uint32_t i = (t >> log2_run) * group + offset + (t & (run - 1));
      x[u] = t < total && i < L ? __ldcg(row + i) : BitsToFloat(0x7FC00000u);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (!IsNan(x[u])) atomicAdd(&hist[Coarse(x[u])], 1u);
    }
  }
}

// Exact coarse recovery, pass 1: the coarse histogram of the whole valid row
// (NaN flagged, not counted). Lanes with equal bins aggregate through
// AggregatedCount, so constant or one-bin rows do not serialise on one counter.
template <int kB>
__device__ __noinline__ void CoarseHistPass(const float* __restrict__ row, uint32_t L,
                                            uint32_t* hist, uint32_t* nan_flag) {
  unsigned nan = 0;
  StreamRow<kB, 2>(row, L, [&](float4 v, uint32_t, unsigned valid) {
    const unsigned nm = NanMask(v) & valid;
    nan |= nm;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const bool ok = ((valid & ~nm) >> j) & 1u;
      AggregatedCount(ok, ok ? Coarse(Lane(v, j)) : 0u, hist);
    }
  });
  if (nan) *nan_flag = 1u;
}

}  // namespace topk::cuda
