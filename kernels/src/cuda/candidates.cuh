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

// Warp-aggregated append of the admitted lanes of v (bit j of m: v[j]
// admitted): one shared atomic per warp reserves the slots, each admitted
// value stores (index, key32) and counts its leading digit.
__device__ __forceinline__ void AppendQuad(float4 v, uint32_t idx0, unsigned m, const Frontier& f,
                                           uint32_t* count, uint32_t* hist) {
  const int lane = threadIdx.x & 31;
  const uint32_t cnt = __popc(m);  // 0..4: three bit-planes give the warp prefix
  const unsigned p0 = __ballot_sync(kFullMask, cnt & 1u);
  const unsigned p1 = __ballot_sync(kFullMask, cnt & 2u);
  const unsigned p2 = __ballot_sync(kFullMask, cnt & 4u);
  const unsigned lt = (1u << lane) - 1u;
  const uint32_t excl = __popc(p0 & lt) + 2u * __popc(p1 & lt) + 4u * __popc(p2 & lt);
  const uint32_t total = __popc(p0) + 2u * __popc(p1) + 4u * __popc(p2);
  uint32_t base = 0;
  if (lane == 0) base = atomicAdd(count, total);
  base = __shfl_sync(kFullMask, base, 0);
  uint32_t pos = base + excl;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if ((m >> j) & 1u) {
      const uint32_t key = Key32(Lane(v, j));
      f.Put(pos++, idx0 + j, key);
      atomicAdd(&hist[KeyDigit0(key)], 1u);
    }
  }
}

// Phase 2: one pass over the valid row. Admits x >= lo (kBand: lo <= x < hi),
// appends the admitted values to f, counts them and their leading key digit,
// and flags NaN. The compare is on raw floats: the cutoffs come from
// CoarseCutoff, so the admitted set is exactly a union of coarse bins.
template <bool kBand, bool kSegment = false, int kUnroll = 4>
__device__ __noinline__ void AdmitPass(const float* __restrict__ row, uint32_t L, float lo,
                                       float hi, const Frontier f, uint32_t* count, uint32_t* hist,
                                       uint32_t* nan_flag, bool prefetch, uint32_t idx_base = 0) {
  unsigned nan = 0;
  StreamRow<kUnroll>(
      row, L,
      [&](float4 v, uint32_t idx0, unsigned valid) {
        unsigned m = AtLeastMask(v, lo);
        if (kBand) m &= ~AtLeastMask(v, hi);
        m &= valid;
        nan |= NanMask(v) & valid;
        if (__any_sync(kFullMask, m != 0))
          AppendQuad(v, kSegment ? idx_base + idx0 : idx0, m, f, count, hist);
      },
      prefetch);
  if (nan) *nan_flag = 1u;
}

// Phase 1: the coarse histogram of the row's view. View: groups of `run`
// consecutive positions starting at run * a_r in every block of run * s
// positions (run == 1 is the paper's i = a_r mod s); about L / s samples.
__device__ __noinline__ void SampleHistogram(const float* __restrict__ row, uint32_t L,
                                             int64_t row_id, int stride, int log2_run,
                                             uint32_t* hist) {
  const uint32_t run = 1u << log2_run;
  const uint32_t group = static_cast<uint32_t>(stride) << log2_run;
  const uint32_t offset = static_cast<uint32_t>(SamplePhase(row_id, stride)) << log2_run;
  const uint32_t total = (L + group - 1) / group * run;
  constexpr int kUnroll = 8;  // 8 loads in flight: a 1M row's view in 2 round trips
  for (uint32_t t0 = threadIdx.x; t0 < total; t0 += kThreads * kUnroll) {
    float x[kUnroll];
    bool ok[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t t = t0 + u * kThreads;
      const uint32_t i = (t >> log2_run) * group + offset + (t & (run - 1));
      ok[u] = t < total && i < L;
      x[u] = ok[u] ? __ldcg(row + i) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (ok[u] && !IsNan(x[u])) atomicAdd(&hist[Coarse(x[u])], 1u);
    }
  }
}

// Exact coarse recovery, pass 1: the coarse histogram of the whole valid row
// (NaN flagged, not counted). Lanes with equal bins aggregate through
// match.any, so constant or one-bin rows do not serialise on one counter.
__device__ __noinline__ void CoarseHistPass(const float* __restrict__ row, uint32_t L,
                                            uint32_t* hist, uint32_t* nan_flag) {
  unsigned nan = 0;
  const int lane = threadIdx.x & 31;
  StreamRow<2>(row, L, [&](float4 v, uint32_t, unsigned valid) {
    const unsigned nm = NanMask(v) & valid;
    nan |= nm;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const bool ok = ((valid & ~nm) >> j) & 1u;
      const uint32_t bin = ok ? Coarse(Lane(v, j)) : 0xFFFFFFFFu;
      const unsigned peers = __match_any_sync(kFullMask, bin);
      if (ok && (__ffs(peers) - 1) == lane) atomicAdd(&hist[bin], __popc(peers));
    }
  });
  if (nan) *nan_flag = 1u;
}

}  // namespace topk::cuda
