// The register-resident direct-exact route (DESIGN section 3) for short rows:
// a CTA of kB threads loads a row of L <= kB * kRegisterQuads * 4 floats into
// registers ONCE, builds the coarse histogram from them, finds tau* (the first
// coarse bin whose prefix reaches K), commits coarse < tau* and appends
// coarse == tau* (index, key32) as the frontier, whose level-0 digit histogram
// it builds in the same register pass. Refine / FinalizeRow (refine.cuh) take
// it from there. The two-pass row-local exact route reads such a row twice.
#pragma once

#include <cstdint>

#include "block_primitives.cuh"
#include "candidates.cuh"
#include "topk/keys.h"

namespace topk::cuda {

// float4 per thread held in registers: 8 x 512 threads x 4 = 16384 floats,
// the sampling crossover, so every row below it fits. 32 floats + the
// scalar head/tail slot need more than 64 registers (the kernel runs one CTA
// of 512 threads per SM at up to 128 registers, without spills).
inline constexpr int kRegisterQuads = 8;
inline constexpr uint32_t kRegisterRowCap = static_cast<uint32_t>(kThreads) * kRegisterQuads * 4;

// A row held by the CTA: thread t owns body float4 u * kB + t (coalesced
// 16-byte loads from the first 16-byte boundary), and threads 0..31 one
// scalar of the head (before the boundary, < 4 floats) or the tail (after
// the last whole float4, < 4 floats).
struct RegisterRow {
  float4 v[kRegisterQuads];
  float scalar;
  uint32_t scalar_idx;  // kNoScalar: this thread holds no head/tail scalar
  uint32_t head;        // scalars before the 16-byte aligned body
  uint32_t n4;          // body float4s
};
inline constexpr uint32_t kNoScalar = 0xFFFFFFFFu;

// Loads row[0, L) (L <= kB * kRegisterQuads * 4; any 4-byte aligned start);
// lanes past L hold 0 and are masked by ForEachRegisterQuad. Every load is
// issued before any is used: 8 x 16 bytes in flight per thread.
template <int kB>
__device__ __forceinline__ void LoadRowToRegisters(const float* __restrict__ row, uint32_t L,
                                                   RegisterRow& rr) {
  const uint32_t tid = threadIdx.x;
  const uint32_t mis = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(row) >> 2) & 3u;
  rr.head = min(L, (4u - mis) & 3u);
  rr.n4 = (L - rr.head) >> 2;
  const uint32_t tail0 = rr.head + 4u * rr.n4;
  const float4* body = reinterpret_cast<const float4*>(row + rr.head);
#pragma unroll
  for (int u = 0; u < kRegisterQuads; ++u) {
    const uint32_t i = u * kB + tid;
    rr.v[u] = i < rr.n4 ? __ldcg(body + i) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  const uint32_t si = tid < rr.head ? tid : tail0 + (tid - rr.head);
  rr.scalar_idx = si < L ? si : kNoScalar;
  rr.scalar = si < L ? __ldcg(row + si) : 0.f;
}

// An empty asm that claims to rewrite the row registers: called between the
// register passes so the compiler recomputes Coarse/Key32 per pass instead
// of keeping 36 derived values live across them (that doubled the live
// registers and spilled at 64). No instruction is emitted.
__device__ __forceinline__ void OpaqueRegisters(RegisterRow& rr) {
#pragma unroll
  for (int u = 0; u < kRegisterQuads; ++u) {
    asm volatile("" : "+f"(rr.v[u].x), "+f"(rr.v[u].y), "+f"(rr.v[u].z), "+f"(rr.v[u].w));
  }
  asm volatile("" : "+f"(rr.scalar));
}

// Calls f(float4 v, uint32_t index_of_v_x, unsigned valid_lanes) for every
// register quad and (warp 0 only) the scalar slot as a quad of one lane,
// warp-uniformly like StreamRow, so f may use warp votes.
template <int kB, typename F>
__device__ __forceinline__ void ForEachRegisterQuad(const RegisterRow& rr, F&& f) {
  const uint32_t tid = threadIdx.x;
#pragma unroll
  for (int u = 0; u < kRegisterQuads; ++u) {
    const uint32_t i = u * kB + tid;
    f(rr.v[u], rr.head + 4u * i, i < rr.n4 ? 0xFu : 0u);
  }
  if (tid < 32) {
    f(make_float4(rr.scalar, 0.f, 0.f, 0.f), rr.scalar_idx, rr.scalar_idx != kNoScalar ? 1u : 0u);
  }
}

// The coarse histogram of the row (NaN flagged, not counted), warp-aggregated
// like CoarseHistPass.
template <int kB>
__device__ __forceinline__ void RegisterCoarseHist(const RegisterRow& rr, uint32_t* hist,
                                                   uint32_t* nan_flag) {
  unsigned nan = 0;
  ForEachRegisterQuad<kB>(rr, [&](float4 v, uint32_t, unsigned valid) {
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

// The key range of the frontier (coarse == tau): *neg_min_key gets ~(its
// smallest key) (PublishMinKey), *max_key its largest (atomicMax); both zero
// on entry. Refinement starts below the bits they share (CommonKeyBits).
template <int kB>
__device__ __forceinline__ void RegisterFrontierKeyRange(const RegisterRow& rr, uint32_t tau,
                                                         uint32_t* neg_min_key, uint32_t* max_key) {
  uint32_t lo = 0xFFFFFFFFu, hi = 0u;
  ForEachRegisterQuad<kB>(rr, [&](float4 v, uint32_t, unsigned valid) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float x = Lane(v, j);
      if (((valid >> j) & 1u) && Coarse(x) == tau) {
        const uint32_t key = Key32(x);
        lo = min(lo, key);
        hi = max(hi, key);
      }
    }
  });
  PublishMinKey(lo, neg_min_key);
  const uint32_t w = __reduce_max_sync(kFullMask, hi);
  if ((threadIdx.x & 31) == 0 && w != 0u) atomicMax(max_key, w);
}

// Reserves per-warp slots for the lanes of m (bit j: lane j of the quad) with
// one shared atomic per warp; returns the lane's first slot.
__device__ __forceinline__ uint32_t WarpReserveQuad(unsigned m, uint32_t* count) {
  uint32_t total;
  const uint32_t excl = WarpPrefix4(__popc(m), &total);
  uint32_t base = 0;
  if ((threadIdx.x & 31) == 0) base = atomicAdd(count, total);
  return __shfl_sync(kFullMask, base, 0) + excl;
}

// The classification passes from registers. Commit: coarse < tau goes to
// out[*out_count++] (those values outrank every frontier value, so any order
// is fine: FinalizeRow sorts).
template <int kB>
__device__ __forceinline__ void RegisterCommit(const RegisterRow& rr, uint32_t tau, uint32_t* out,
                                               uint32_t* out_count) {
  ForEachRegisterQuad<kB>(rr, [&](float4 v, uint32_t idx0, unsigned valid) {
    unsigned mc = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) mc |= Coarse(Lane(v, j)) < tau ? valid & (1u << j) : 0u;
    if (__any_sync(kFullMask, mc != 0u)) {
      uint32_t pos = WarpReserveQuad(mc, out_count);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if ((mc >> j) & 1u) out[pos++] = idx0 + j;
      }
    }
  });
}

// Frontier: coarse == tau appended to fa (positions from *front_count,
// shared part first) with its level-0 digit (key bits above shift0) counted
// into hist. The caller has checked that the frontier fits fa. A separate
// pass from the commit one: fewer values live at once (no spills at 64
// registers).
template <int kB>
__device__ __forceinline__ void RegisterFrontier(const RegisterRow& rr, uint32_t tau, int shift0,
                                                 const Frontier& fa, uint32_t* front_count,
                                                 uint32_t* hist) {
  ForEachRegisterQuad<kB>(rr, [&](float4 v, uint32_t idx0, unsigned valid) {
    unsigned mf = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) mf |= Coarse(Lane(v, j)) == tau ? valid & (1u << j) : 0u;
    if (__any_sync(kFullMask, mf != 0u)) {
      uint32_t pos = WarpReserveQuad(mf, front_count);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const bool in = (mf >> j) & 1u;
        const uint32_t key = Key32(Lane(v, j));
        if (in) fa.Put(pos++, idx0 + j, key);
        AggregatedCount(in, (key >> shift0) & 0x7FFu, hist);
      }
    }
  });
}

}  // namespace topk::cuda
