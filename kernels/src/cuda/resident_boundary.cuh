// The resident route's boundary search (decode_route.cu, after step 2): the
// bin of the K-th value in the cluster's histogram, by one warp and one
// barrier instead of a block-wide scan of 2048 bins (three barriers): the
// exchange leaves every rank the totals of the ranks' bin slices, so the warp
// finds the slice holding the K-th value from `ranks` words, then the bin
// within that slice from its 2048 / ranks bins.
#pragma once

#include <cstdint>

#include "block_primitives.cuh"
#include "topk/keys.h"

namespace topk::cuda {

// The K-th value's bin b of hist (kCoarseBins bins, in `ranks` equal slices
// whose totals are slice_total[0, ranks); ranks a power of two <= 16): the
// values in bins < b (below), in b (in_bin) and in all (total). The row holds
// at least k values. Every thread calls it; it synchronises on exit (the
// caller's barrier before it published hist and slice_total).
template <int kB>
__device__ __noinline__ Boundary ResidentBoundary(const uint32_t* hist, const uint32_t* slice_total,
                                                  uint32_t ranks, uint32_t k, BoundaryScratch& s) {
  const uint32_t tid = threadIdx.x, lane = tid & 31;
  if (tid < 32) {
    // The slice: the first whose inclusive prefix reaches k.
    const uint32_t t = lane < ranks ? slice_total[lane] : 0u;
    uint32_t incl = t;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const uint32_t y = __shfl_up_sync(kFullMask, incl, o);
      if (lane >= o) incl += y;
    }
    const uint32_t total = __shfl_sync(kFullMask, incl, 31);
    const int slice = __ffs(__ballot_sync(kFullMask, lane < ranks && incl >= k)) - 1;
    const uint32_t before_slice = __shfl_sync(kFullMask, incl - t, slice);
    // The bin: the slice's bins, per_lane consecutive ones a lane.
    const uint32_t per_lane = kCoarseBins / ranks / 32u;
    const uint32_t* bins =
        hist + static_cast<uint32_t>(slice) * (kCoarseBins / ranks) + lane * per_lane;
    uint32_t sum = 0;
    for (uint32_t i = 0; i < per_lane; i += 4) {
      const uint4 v = *reinterpret_cast<const uint4*>(bins + i);
      sum += v.x + v.y + v.z + v.w;
    }
    uint32_t run = sum;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const uint32_t y = __shfl_up_sync(kFullMask, run, o);
      if (lane >= o) run += y;
    }
    run += before_slice;
    const int owner = __ffs(__ballot_sync(kFullMask, run >= k)) - 1;
    if (static_cast<int>(lane) == owner) {
      uint32_t below = run - sum;
      uint32_t i = 0;
      while (below + bins[i] < k) below += bins[i++];
      s.bin = static_cast<uint32_t>(slice) * (kCoarseBins / ranks) + lane * per_lane + i;
      s.below = below;
      s.in_bin = bins[i];
      s.total = total;
    }
  }
  __syncthreads();
  return Boundary{s.bin, s.below, s.in_bin, s.total};
}

}  // namespace topk::cuda
