// Block-wide building blocks of the selector kernels: the boundary search over
// a histogram (prefix scan), a bitonic sort, and the row streamer that every
// full-row pass (certification, exact coarse histogram, re-scan) shares, for
// either row view of score_row.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernel_args.h"
#include "score_row.cuh"
#include "topk/keys.h"

namespace topk::cuda {

inline constexpr unsigned kFullMask = 0xFFFFFFFFu;

// Result of a boundary search: the first bin whose inclusive prefix reaches
// the target, the count strictly before it and inside it, and the total.
struct Boundary {
  uint32_t bin;
  uint32_t below;
  uint32_t in_bin;
  uint32_t total;
};

struct BoundaryScratch {
  uint32_t warp[32];
  uint32_t bin, below, in_bin, total;
  uint32_t bin_b, below_b, in_bin_b;
};

// Boundary search for two targets over the same histogram in one scan (the
// proposal's q0 and q1) by a CTA of kB threads. nbins <= kCoarseBins, a
// multiple of kB. bin == nbins when the total never reaches the target.
// Synchronises on entry and exit.
template <int kB>
__device__ __forceinline__ void FindBoundaries(const uint32_t* hist, int nbins, uint32_t target_a,
                                               uint32_t target_b, BoundaryScratch& s, Boundary* ra,
                                               Boundary* rb) {
  constexpr int kWarps = kB / 32;
  constexpr int kMaxPer = kCoarseBins / kB;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int per = nbins / kB;
  __syncthreads();
  uint32_t local[kMaxPer];
  uint32_t sum = 0;
#pragma unroll
  for (int i = 0; i < kMaxPer; ++i) {
    local[i] = i < per ? hist[tid * per + i] : 0u;
    sum += local[i];
  }
  uint32_t incl = sum;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t y = __shfl_up_sync(kFullMask, incl, o);
    if (lane >= o) incl += y;
  }
  if (lane == 31) s.warp[warp] = incl;
  if (tid == 0) {
    s.bin = nbins, s.below = 0, s.in_bin = 0;
    s.bin_b = nbins, s.below_b = 0, s.in_bin_b = 0;
  }
  __syncthreads();
  if (warp == 0) {
    const uint32_t w = lane < kWarps ? s.warp[lane] : 0u;
    uint32_t wi = w;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const uint32_t y = __shfl_up_sync(kFullMask, wi, o);
      if (lane >= o) wi += y;
    }
    if (lane < kWarps) s.warp[lane] = wi - w;  // exclusive
    if (lane == kWarps - 1) s.total = wi;
  }
  __syncthreads();
  uint32_t run = s.warp[warp] + incl - sum;
#pragma unroll
  for (int i = 0; i < kMaxPer; ++i) {
    if (i < per && run < target_a && run + local[i] >= target_a) {
      s.bin = tid * per + i;
      s.below = run;
      s.in_bin = local[i];
    }
    if (i < per && run < target_b && run + local[i] >= target_b) {
      s.bin_b = tid * per + i;
      s.below_b = run;
      s.in_bin_b = local[i];
    }
    run += local[i];
  }
  __syncthreads();
  *ra = Boundary{s.bin, s.below, s.in_bin, s.total};
  *rb = Boundary{s.bin_b, s.below_b, s.in_bin_b, s.total};
}

template <int kB>
__device__ __forceinline__ Boundary FindBoundary(const uint32_t* hist, int nbins, uint32_t target,
                                                 BoundaryScratch& s) {
  Boundary a, b;
  FindBoundaries<kB>(hist, nbins, target, target, s, &a, &b);
  return a;
}

// Warp-aggregated slot reservation: every lane calls it; lanes with pred get
// consecutive slots of *counter (one shared atomic per warp).
__device__ __forceinline__ uint32_t WarpReserve(bool pred, uint32_t* counter) {
  const unsigned mask = __ballot_sync(kFullMask, pred);
  if (mask == 0u) return 0u;
  const int lane = threadIdx.x & 31;
  const int leader = __ffs(mask) - 1;
  uint32_t base = 0;
  if (lane == leader) base = atomicAdd(counter, static_cast<uint32_t>(__popc(mask)));
  base = __shfl_sync(kFullMask, base, leader);
  return base + __popc(mask & ((1u << lane) - 1u));
}

// A shared-memory pointer as the 32-bit shared-window address that
// SharedAddIf takes (converted once per pass, not once per atomic).
__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Adds n to the shared word at addr when pred holds: one predicated reduction,
// where `if (pred) atomicAdd(p, n)` on a generic pointer compiles to a branch
// around the window conversion and the atomic.
__device__ __forceinline__ void SharedAddIf(bool pred, uint32_t addr, uint32_t n) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.u32 p, %0, 0;\n @p red.shared.add.u32 [%1], %2;\n}" ::"r"(
          static_cast<uint32_t>(pred)),
      "r"(addr), "r"(n)
      : "memory");
}

// CoarseCutoff(b) computed by one warp: a radix-32 search over descending
// keys (7 rounds of 32 probes instead of 32 dependent bisection steps on one
// thread). Same result: the largest key whose coarse bin is <= b.
__device__ __forceinline__ float WarpCoarseCutoff(uint32_t b) {
  if (b < kCoarseOfPlusInf) return BitsToFloat(0x7FC00000u);
  if (b >= kCoarseOfMinusInf) return BitsToFloat(0xFF800000u);
  const int lane = threadIdx.x & 31;
  uint32_t lo = kKeyOfPlusInf;   // coarse(value(lo)) <= b
  uint32_t hi = kKeyOfMinusInf;  // coarse(value(hi)) > b
  while (hi - lo > 1u) {
    const uint32_t step = (hi - lo + 31u) / 32u;
    const uint32_t probe = lo + (lane + 1) * step;  // may pass hi: treated as false
    const bool in = probe < hi && Coarse(BitsToFloat(BitsOfDescendingKey(probe))) <= b;
    const uint32_t n = __popc(__ballot_sync(kFullMask, in));
    const uint32_t new_lo = lo + n * step;
    const uint32_t cand_hi = lo + (n + 1) * step;
    hi = cand_hi < hi ? cand_hi : hi;
    lo = new_lo;
  }
  return BitsToFloat(BitsOfDescendingKey(lo));
}

// Hopper bulk L2 prefetch (no registers, no completion to wait for):
// p 16-byte aligned, bytes a multiple of 16, the range inside the row.
__device__ __forceinline__ void PrefetchL2(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(__cvta_generic_to_global(p)),
               "r"(bytes)
               : "memory");
#endif
}

// Chunks of the row's 16-byte body the streaming loop keeps prefetched ahead
// of its loads (each chunk is one loop step: kB * kUnroll float4). The
// first kPrefetchChunks are prefetched when the row starts (PrefetchRowHead).
inline constexpr uint32_t kPrefetchChunks = 2;

// Ascending bitonic sort of n (a power of two) 64-bit keys, shared or global
// memory, by a CTA of kB threads. Callers synchronise before; synchronises
// after.
template <int kB>
__device__ __forceinline__ void BlockBitonicSort(uint64_t* a, uint32_t n) {
  for (uint32_t k = 2; k <= n; k <<= 1) {
    for (uint32_t j = k >> 1; j > 0; j >>= 1) {
      for (uint32_t i = threadIdx.x; i < n; i += kB) {
        const uint32_t ixj = i ^ j;
        if (ixj > i) {
          const uint64_t x = a[i], y = a[ixj];
          const bool up = (i & k) == 0;
          if ((x > y) == up) {
            a[i] = y;
            a[ixj] = x;
          }
        }
      }
      __syncthreads();
    }
  }
}

// How a 16-byte load becomes the phases' float4 groups: one group of 4 FP32
// values, or two groups of 4 widened 16-bit values (element order: the low
// half of each 32-bit word first). ok == false: the groups' valid masks are 0.
struct UnpackF32 {
  template <typename F>
  __device__ __forceinline__ static void Emit(uint4 v, uint32_t idx, bool ok, F& f) {
    f(make_float4(__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z),
                  __uint_as_float(v.w)),
      idx, ok ? 0xFu : 0u);
  }
};
struct UnpackBf16 {
  __device__ __forceinline__ static float2 Pair(uint32_t w) {
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xFFFF0000u));
  }
  // The prefilter of StreamRowAtLeast: lo rounded down to the type (so
  // widen(h) >= lo implies h >= it), in both halves of a word.
  __device__ __forceinline__ static uint32_t Threshold(float lo) {
    const uint32_t t = __bfloat16_as_ushort(__float2bfloat16_rd(lo));
    return t | (t << 16);
  }
  // Whether one of the 8 values is >= the threshold or NaN (unordered >=,
  // two values per instruction on sm_90).
  __device__ __forceinline__ static bool AnyAtLeastOrNan(uint4 v, uint32_t t2) {
    const __nv_bfloat162 t = Bits(t2);
    return (__hgeu2_mask(Bits(v.x), t) | __hgeu2_mask(Bits(v.y), t) | __hgeu2_mask(Bits(v.z), t) |
            __hgeu2_mask(Bits(v.w), t)) != 0u;
  }
  __device__ __forceinline__ static __nv_bfloat162 Bits(uint32_t w) {
    __nv_bfloat162 h;
    memcpy(&h, &w, sizeof(h));
    return h;
  }
  // lo rounded up to the type (NaN stays NaN), in both halves: for every
  // BF16 h, widen(h) >= lo <=> h >= it (StreamAdmit's exact masks).
  __device__ __forceinline__ static uint32_t ExactThreshold(float lo) {
    const uint32_t u = __float_as_uint(lo);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC07FC0u;
    const uint32_t t = (u >> 16) + ((u & 0xFFFFu) != 0u && (u & 0x80000000u) == 0u ? 1u : 0u);
    return t | (t << 16);
  }
  template <typename F>
  __device__ __forceinline__ static void Emit(uint4 v, uint32_t idx, bool ok, F& f) {
    // The second group is widened after the first is consumed (fewer live
    // registers in the main pass).
    const float2 a = Pair(v.x), b = Pair(v.y);
    f(make_float4(a.x, a.y, b.x, b.y), idx, ok ? 0xFu : 0u);
    const float2 c = Pair(v.z), d = Pair(v.w);
    f(make_float4(c.x, c.y, d.x, d.y), idx + 4u, ok ? 0xFu : 0u);
  }
};
struct UnpackFp16 {
  __device__ __forceinline__ static float2 Pair(uint32_t w) { return __half22float2(Bits(w)); }
  __device__ __forceinline__ static uint32_t Threshold(float lo) {
    const uint32_t t = __half_as_ushort(__float2half_rd(lo));
    return t | (t << 16);
  }
  __device__ __forceinline__ static bool AnyAtLeastOrNan(uint4 v, uint32_t t2) {
    const __half2 t = Bits(t2);
    return (__hgeu2_mask(Bits(v.x), t) | __hgeu2_mask(Bits(v.y), t) | __hgeu2_mask(Bits(v.z), t) |
            __hgeu2_mask(Bits(v.w), t)) != 0u;
  }
  __device__ __forceinline__ static __half2 Bits(uint32_t w) {
    __half2 h;
    memcpy(&h, &w, sizeof(h));
    return h;
  }
  __device__ __forceinline__ static uint32_t ExactThreshold(float lo) {
    const uint32_t t = __half_as_ushort(__float2half_ru(lo));
    return t | (t << 16);
  }
  template <typename F>
  __device__ __forceinline__ static void Emit(uint4 v, uint32_t idx, bool ok, F& f) {
    // The second group is widened after the first is consumed (fewer live
    // registers in the main pass).
    const float2 a = Pair(v.x), b = Pair(v.y);
    f(make_float4(a.x, a.y, b.x, b.y), idx, ok ? 0xFu : 0u);
    const float2 c = Pair(v.z), d = Pair(v.w);
    f(make_float4(c.x, c.y, d.x, d.y), idx + 4u, ok ? 0xFu : 0u);
  }
};

// The body of StreamRow for one element type (Unpack). kFilter: a 16-byte
// load none of whose values is >= the packed threshold t2 or NaN is skipped
// by the whole warp (the vote keeps f's calls warp-uniform). kBatchedTail:
// the loads past the last full step of kUnroll are issued together too (a
// short segment is then one round trip, not one per kB loads); otherwise
// the tail issues one load per thread at a time (fewer instructions, the
// long rows' streaming passes).
template <int kB, int kUnroll, typename Unpack, bool kFilter, typename Row, typename F,
          bool kBatchedTail = false>
__device__ __forceinline__ void StreamRowAs(const Row& row, uint32_t L, F& f, bool prefetch,
                                            uint32_t t2) {
  constexpr uint32_t kV = Row::kPerLoad;
  const uint32_t tid = threadIdx.x;
  const uint32_t head = HeadElements(row, L);
  const uint32_t nv = (L - head) / kV;
  const uint4* body = reinterpret_cast<const uint4*>(row.p + head);
  constexpr uint32_t kStep = kB * kUnroll;
  const uint32_t full_end = nv / kStep * kStep;
  for (uint32_t base = 0; base < full_end; base += kStep) {
    // More bytes in flight than the registers hold: the chunk kPrefetchChunks
    // steps ahead goes to L2 now (a few microseconds before its loads).
    if (prefetch && threadIdx.x == 0 && base + (kPrefetchChunks + 1) * kStep <= full_end) {
      PrefetchL2(body + base + kPrefetchChunks * kStep, kStep * 16u);
    }
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldcg(body + base + u * kB + tid);
    unsigned hit = (1u << kUnroll) - 1u;
    if constexpr (kFilter) {
      hit = 0u;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) hit |= Unpack::AnyAtLeastOrNan(v[u], t2) ? 1u << u : 0u;
      hit = __reduce_or_sync(kFullMask, hit);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if ((hit >> u) & 1u) Unpack::Emit(v[u], head + kV * (base + u * kB + tid), true, f);
    }
  }
  if constexpr (kBatchedTail) {
    if (full_end < nv) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const uint32_t i = full_end + u * kB + tid;
        v[u] = i < nv ? __ldcg(body + i) : make_uint4(0u, 0u, 0u, 0u);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const uint32_t i = full_end + u * kB + tid;
        // Warp-uniform: the warp's first lane decides whether it calls f.
        if (full_end + u * kB + (tid & ~31u) >= nv) break;
        bool hit = true;
        if constexpr (kFilter)
          hit = __any_sync(kFullMask, i < nv && Unpack::AnyAtLeastOrNan(v[u], t2));
        if (hit) Unpack::Emit(v[u], head + kV * i, i < nv, f);
      }
    }
  } else {
    for (uint32_t base = full_end; base < nv; base += kB) {
      const uint32_t i = base + tid;
      const bool ok = i < nv;
      const uint4 v = ok ? __ldcg(body + i) : make_uint4(0u, 0u, 0u, 0u);
      bool hit = true;
      if constexpr (kFilter) hit = __any_sync(kFullMask, ok && Unpack::AnyAtLeastOrNan(v, t2));
      if (hit) Unpack::Emit(v, head + kV * i, ok, f);
    }
  }
  // Head and tail hold fewer than kV elements each: one per lane of warp 0.
  const uint32_t tail0 = head + kV * nv;
  const uint32_t ntail = L - tail0;
  if (tid < 32) {
    const uint32_t i = tid < head ? tid : tail0 + (tid - head);
    const bool ok = tid < head + ntail;
    const float x = ok ? row.At(i) : 0.f;
    f(make_float4(x, 0.f, 0.f, 0.f), i, ok ? 1u : 0u);
  }
}

// Streams a row of L scores with 16-byte loads (any element-aligned start: a
// scalar head up to the 16-byte boundary, a body of 16-byte loads with
// kUnroll in flight per thread, a scalar tail), widened to FP32 (score_row.cuh).
// f(float4 v, uint32_t index_of_v_x, unsigned valid_lanes_mask) is called
// warp-uniformly (every lane of a warp calls it the same number of times), so
// f may use warp votes. kB: threads per CTA.
template <int kB, int kUnroll, typename F>
__device__ __forceinline__ void StreamRow(const F32Row& row, uint32_t L, F&& f,
                                          bool prefetch = false) {
  StreamRowAs<kB, kUnroll, UnpackF32, false>(row, L, f, prefetch, 0u);
}
// 16-bit rows: the type branch is taken once per row, outside the loop.
template <int kB, int kUnroll, typename F>
__device__ __forceinline__ void StreamRow(const Half16Row& row, uint32_t L, F&& f,
                                          bool prefetch = false) {
  if (row.fp16) {
    StreamRowAs<kB, kUnroll, UnpackFp16, false>(row, L, f, prefetch, 0u);
  } else {
    StreamRowAs<kB, kUnroll, UnpackBf16, false>(row, L, f, prefetch, 0u);
  }
}

// StreamRow for a segment of at most kB * kUnroll 16-byte loads past its
// full steps: every load of the tail in flight at once (the resident route's
// slices: one round trip per segment, the latency of a decode row).
template <int kB, int kUnroll, typename F>
__device__ __forceinline__ void StreamSegment(const F32Row& row, uint32_t L, F&& f) {
  StreamRowAs<kB, kUnroll, UnpackF32, false, F32Row, F, true>(row, L, f, false, 0u);
}
template <int kB, int kUnroll, typename F>
__device__ __forceinline__ void StreamSegment(const Half16Row& row, uint32_t L, F&& f) {
  if (row.fp16) {
    StreamRowAs<kB, kUnroll, UnpackFp16, false, Half16Row, F, true>(row, L, f, false, 0u);
  } else {
    StreamRowAs<kB, kUnroll, UnpackBf16, false, Half16Row, F, true>(row, L, f, false, 0u);
  }
}

// StreamRow for passes that only act on values x >= lo (and on NaN): f may
// be skipped for 16-byte loads that hold neither. 16-bit rows test a load's
// 8 values with 4 packed compares before widening any (a row's streaming
// pass is otherwise bound by per-value instructions at 2 bytes a value);
// FP32 rows call f for every load, as StreamRow.
template <int kB, int kUnroll, typename F>
__device__ __forceinline__ void StreamRowAtLeast(const F32Row& row, uint32_t L, float, F&& f,
                                                 bool prefetch = false) {
  StreamRowAs<kB, kUnroll, UnpackF32, false>(row, L, f, prefetch, 0u);
}
template <int kB, int kUnroll, typename F>
__device__ __forceinline__ void StreamRowAtLeast(const Half16Row& row, uint32_t L, float lo, F&& f,
                                                 bool prefetch = false) {
  if (row.fp16) {
    StreamRowAs<kB, kUnroll, UnpackFp16, true>(row, L, f, prefetch, UnpackFp16::Threshold(lo));
  } else {
    StreamRowAs<kB, kUnroll, UnpackBf16, true>(row, L, f, prefetch, UnpackBf16::Threshold(lo));
  }
}

// Prefetches the first kPrefetchChunks steps (kUnroll = 4) of a row's body to
// L2 while the CTA (kB threads) is busy with the latency-bound proposal. One
// thread.
template <int kB, typename Row>
__device__ __forceinline__ void PrefetchRowHead(const Row& row, uint32_t L) {
  const uint32_t head = HeadElements(row, L);
  const uint32_t nv = (L - head) / Row::kPerLoad;
  const uint32_t chunk = kB * 4u;
  const uint32_t want = min(nv / chunk * chunk, kPrefetchChunks * chunk);
  if (want > 0) PrefetchL2(row.Address(head), want * 16u);
}

}  // namespace topk::cuda
