// The resident route's exchange (decode_route.cu, step 2): between two
// cluster barriers every rank ends with the whole row's coarse histogram and
// the row's NaN flag, in one round of distributed shared memory loads whose
// accesses are all independent (a latency, not a latency per rank): rank r
// owns the bin slice r; the `ranks` lanes of a group read one bin of the
// slice from every rank, sum it with shuffles (no atomics, no barrier) and
// store the sum into every rank's total, a lane per rank. One warp reads the
// ranks' NaN flags, a lane per rank.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "block_primitives.cuh"
#include "resident_state.cuh"

namespace topk::cuda {
#if TOPK_HAS_CLUSTERS

// After the barrier that completes every rank's view_hist and counts; the
// caller's next cluster barrier completes every total_hist (each bin written
// by its owner alone: nothing to zero first), and its __syncthreads
// publishes *totals (thread 0 writes it). kB threads, kCoarseBins = 4 kB,
// ranks a power of two up to 32.
template <int kB>
__device__ __noinline__ void ExchangeResidentHistograms(const uint32_t* view_hist,
                                                        uint32_t* total_hist,
                                                        const ResidentCounts* counts,
                                                        ResidentTotals* totals) {
  namespace cg = cooperative_groups;
  static_assert(kCoarseBins == 4 * kB, "four (bin, rank) pairs per thread");
  cg::cluster_group cluster = cg::this_cluster();
  const uint32_t ranks = cluster.num_blocks();
  const uint32_t me = cluster.block_rank();
  const uint32_t first = me * (kCoarseBins / ranks);
  const uint32_t tid = threadIdx.x;
  if (tid < 32) {
    const uint32_t lane = tid;
    const uint32_t mine = lane < ranks ? cluster.map_shared_rank(counts, lane)->nan : 0u;
    const uint32_t nan = __reduce_or_sync(kFullMask, mine);
    if (lane == 0) totals->nan = nan;
  }
  // Pair p = u kB + tid is (bin first + p / ranks, rank p % ranks): a bin's
  // ranks are adjacent lanes of one warp.
  const uint32_t q = tid & (ranks - 1u);
  const uint32_t* peer_view = cluster.map_shared_rank(view_hist, q);
  uint32_t* peer_total = cluster.map_shared_rank(total_hist, q);
  uint32_t v[4];
#pragma unroll
  for (int u = 0; u < 4; ++u) v[u] = peer_view[first + (u * kB + tid) / ranks];
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    for (uint32_t o = 1; o < ranks; o <<= 1) v[u] += __shfl_xor_sync(kFullMask, v[u], o);
  }
#pragma unroll
  for (int u = 0; u < 4; ++u) peer_total[first + (u * kB + tid) / ranks] = v[u];
}

#endif  // TOPK_HAS_CLUSTERS
}  // namespace topk::cuda
