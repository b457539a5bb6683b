// The resident route's exchange (decode_route.cu, step 2): between two
// cluster barriers every rank ends with the whole row's coarse histogram and
// the row's NaN flag, in two rounds of distributed shared
// memory traffic whose accesses are all independent (a latency each, not a
// latency per rank): rank q sums the bin slice q of every rank's histogram
// (reduce-scatter, 4 remote loads per thread), then writes its sums into
// every other rank's total (all-gather, 4 remote stores per thread); one warp
// reads the ranks' counts, a lane per rank.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "block_primitives.cuh"
#include "resident_state.cuh"

namespace topk::cuda {
#if TOPK_HAS_CLUSTERS

// After the barrier that completes every rank's view_hist and counts; the
// caller's next cluster barrier completes every total_hist, and its
// __syncthreads publishes *totals (thread 0 writes it). total_hist zeroed by
// the caller before the first barrier. kB threads (512 or 1024: kCoarseBins
// / kB (bin, rank) pairs each).
template <int kB>
__device__ __noinline__ void ExchangeResidentHistograms(const uint32_t* view_hist,
                                                        uint32_t* total_hist,
                                                        const ResidentCounts* counts,
                                                        ResidentTotals* totals) {
  namespace cg = cooperative_groups;
  constexpr int kPairs = kCoarseBins / kB;
  static_assert(kCoarseBins == kPairs * kB, "whole (bin, rank) pairs per thread");
  cg::cluster_group cluster = cg::this_cluster();
  const uint32_t ranks = cluster.num_blocks();
  const uint32_t me = cluster.block_rank();
  const uint32_t per = kCoarseBins / ranks;
  const uint32_t first = me * per;
  const uint32_t tid = threadIdx.x;
  if (tid < 32) {
    const uint32_t lane = tid;
    const uint32_t mine = lane < ranks ? cluster.map_shared_rank(counts, lane)->nan : 0u;
    const uint32_t nan = __reduce_or_sync(kFullMask, mine);
    if (lane == 0) totals->nan = nan;
  }
  // Reduce-scatter: pair p = (rank p / per, bin first + p % per).
  uint32_t v[kPairs];
#pragma unroll
  for (int u = 0; u < kPairs; ++u) {
    const uint32_t p = tid + u * kB;
    v[u] = cluster.map_shared_rank(view_hist, p / per)[first + p % per];
  }
#pragma unroll
  for (int u = 0; u < kPairs; ++u) {
    const uint32_t p = tid + u * kB;
    if (v[u] != 0u) atomicAdd(&total_hist[first + p % per], v[u]);
  }
  __syncthreads();
  // All-gather: the slice's sums into every other rank's total.
#pragma unroll
  for (int u = 0; u < kPairs; ++u) {
    const uint32_t p = tid + u * kB;
    const uint32_t q = p / per;
    const uint32_t bin = first + p % per;
    if (q != me) cluster.map_shared_rank(total_hist, q)[bin] = total_hist[bin];
  }
}

#endif  // TOPK_HAS_CLUSTERS
}  // namespace topk::cuda
