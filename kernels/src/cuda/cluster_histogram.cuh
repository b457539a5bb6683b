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
    uint32_t sum = 0;
    for (uint32_t q = 0; q < ranks; ++q) {
      sum += cluster.map_shared_rank(view_hist, q)[bin];
    }
    for (uint32_t q = 0; q < ranks; ++q) {
      cluster.map_shared_rank(total_hist, q)[bin] = sum;
    }
  }
}

// Every rank's published counts, summed (the same on every rank). Between
// the barrier after the classification pass and the one before any rank
// resets its counts.
struct ClusterTotals {
  uint32_t certified = 0, band = 0, nan = 0, neg_min_key = 0;
  uint32_t certified_before = 0, band_before = 0;  // of the ranks below this one
};
__device__ __forceinline__ ClusterTotals ReadClusterTotals(ClusterCounts* mine) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const uint32_t ranks = cluster.num_blocks();
  const uint32_t me = cluster.block_rank();
  ClusterTotals t;
  for (uint32_t q = 0; q < ranks; ++q) {
    const ClusterCounts c = *cluster.map_shared_rank(mine, q);
    if (q < me) t.certified_before += c.certified, t.band_before += c.band;
    t.certified += c.certified;
    t.band += c.band;
    t.nan |= c.nan;
    t.neg_min_key = max(t.neg_min_key, c.neg_min_key);
  }
  return t;
}

#endif  // TOPK_HAS_CLUSTERS
}  // namespace topk::cuda
