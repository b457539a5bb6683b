// Block-wide building blocks of the selector kernels: the boundary search over
// a histogram (prefix scan), a bitonic sort, and the row streamer that every
// full-row pass (certification, exact coarse histogram, re-scan) shares.
#pragma once

#include <cstdint>

#include "kernel_args.h"
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

// Streams a row of L floats with 16-byte loads (any 4-byte aligned start: a
// scalar head up to the 16-byte boundary, a float4 body with kUnroll loads in
// flight per thread, a scalar tail). f(float4 v, uint32_t index_of_v_x,
// unsigned valid_lanes_mask) is called warp-uniformly (every lane of a warp
// calls it the same number of times), so f may use warp votes. kB: threads per
// CTA.
template <int kB, int kUnroll, typename F>
__device__ __forceinline__ void StreamRow(const float* __restrict__ row, uint32_t L, F&& f,
                                          bool prefetch = false) {
  const uint32_t tid = threadIdx.x;
  const uint32_t mis = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(row) >> 2) & 3u;
  const uint32_t head = min(L, (4u - mis) & 3u);
  const uint32_t n4 = (L - head) >> 2;
  const float4* body = reinterpret_cast<const float4*>(row + head);
  constexpr uint32_t kStep = kB * kUnroll;
  const uint32_t full_end = n4 / kStep * kStep;
  for (uint32_t base = 0; base < full_end; base += kStep) {
    // More bytes in flight than the registers hold: the chunk kPrefetchChunks
    // steps ahead goes to L2 now (a few microseconds before its loads).
    if (prefetch && threadIdx.x == 0 && base + (kPrefetchChunks + 1) * kStep <= full_end) {
      PrefetchL2(body + base + kPrefetchChunks * kStep, kStep * 16u);
    }
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldcg(body + base + u * kB + tid);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) f(v[u], head + 4u * (base + u * kB + tid), 0xFu);
  }
  for (uint32_t base = full_end; base < n4; base += kB) {
    const uint32_t i = base + tid;
    const bool ok = i < n4;
    const float4 v = ok ? __ldcg(body + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    f(v, head + 4u * i, ok ? 0xFu : 0u);
  }
  const uint32_t tail0 = head + 4u * n4;
  const uint32_t ntail = L - tail0;
  if (tid < 32) {
    const uint32_t i = tid < head ? tid : tail0 + (tid - head);
    const bool ok = tid < head + ntail;
    const float x = ok ? __ldcg(row + i) : 0.f;
    f(make_float4(x, 0.f, 0.f, 0.f), i, ok ? 1u : 0u);
  }
}

// Prefetches the first kPrefetchChunks steps (kUnroll = 4) of a row's body to
// L2 while the CTA (kB threads) is busy with the latency-bound proposal. One
// thread.
template <int kB>
__device__ __forceinline__ void PrefetchRowHead(const float* row, uint32_t L) {
  const uint32_t mis = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(row) >> 2) & 3u;
  const uint32_t head = min(L, (4u - mis) & 3u);
  const uint32_t n4 = (L - head) >> 2;
  const uint32_t chunk4 = kB * 4u;
  const uint32_t want4 = min(n4 / chunk4 * chunk4, kPrefetchChunks * chunk4);
  if (want4 > 0) PrefetchL2(row + head, want4 * 16u);
}

}  // namespace topk::cuda
