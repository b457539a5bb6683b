// The cluster route's histogram all-reduce (docs/design.md section 3): every
// rank holds the coarse histogram of its part of the row's view (or, on the
// exact fallback, of its whole segment); rank q sums the bin slice q of all
// ranks through distributed shared memory and writes the sum into every rank's
// total_hist, so each rank ends with the whole row's histogram and no rank
// rebuilds another's proposal.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "cluster_state.cuh"

namespace topk::cuda {
#if TOPK_HAS_CLUSTERS

// Between two cluster barriers: the caller's cluster.sync() before (every
// view_hist complete) and after (every total_hist complete). kB threads.
template <int kB>
__device__ __noinline__ void ClusterAllReduceHistogram(uint32_t* view_hist, uint32_t* total_hist) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const uint32_t ranks = cluster.num_blocks();
  const uint32_t per = kCoarseBins / ranks;
  const uint32_t first = cluster.block_rank() * per;
  for (uint32_t i = threadIdx.x; i < per; i += kB) {
    const uint32_t bin = first + i;
    // Eight ranks' counts issued before the first is used: one distributed
    // shared memory round trip per eight ranks, not one a rank.
    uint32_t sum = 0;
    for (uint32_t q0 = 0; q0 < ranks; q0 += 8) {
      uint32_t v[8];
#pragma unroll
      for (uint32_t j = 0; j < 8; ++j) {
        v[j] = q0 + j < ranks ? cluster.map_shared_rank(view_hist, q0 + j)[bin] : 0u;
      }
#pragma unroll
      for (uint32_t j = 0; j < 8; ++j) sum += v[j];
    }
    for (uint32_t q = 0; q < ranks; ++q) cluster.map_shared_rank(total_hist, q)[bin] = sum;
  }
}

// Every rank's published counts, summed (the same on every rank). Between
// the barrier after the classification pass and the one before any rank
// resets its counts.
struct ClusterTotals {
  uint32_t certified = 0, band = 0, nan = 0, neg_min_key = 0;
  uint32_t certified_before = 0, band_before = 0;  // of the ranks below this one
};
// Every warp reads the ranks' counts in parallel (lane q: rank q) and sums
// them with warp reductions: one round trip instead of one a rank. Every
// thread of the CTA calls it (whole warps).
__device__ __forceinline__ ClusterTotals ReadClusterTotals(ClusterCounts* mine) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const uint32_t ranks = cluster.num_blocks();
  const uint32_t me = cluster.block_rank();
  const uint32_t lane = threadIdx.x & 31u;
  ClusterCounts c{};
  if (lane < ranks) c = *cluster.map_shared_rank(mine, lane);
  const bool below = lane < me;
  ClusterTotals t;
  t.certified = __reduce_add_sync(kFullMask, c.certified);
  t.band = __reduce_add_sync(kFullMask, c.band);
  t.nan = __reduce_or_sync(kFullMask, c.nan);
  t.neg_min_key = __reduce_max_sync(kFullMask, c.neg_min_key);
  t.certified_before = __reduce_add_sync(kFullMask, below ? c.certified : 0u);
  t.band_before = __reduce_add_sync(kFullMask, below ? c.band : 0u);
  return t;
}

#endif  // TOPK_HAS_CLUSTERS
}  // namespace topk::cuda
