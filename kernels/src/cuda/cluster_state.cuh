// The shared memory of one rank of the cluster route (cluster_route.cu): the
// CTA state every phase shares (SharedState<kThreads>), the frontier arenas
// rank 0 refines in, and the rank's own part of the cluster's work (its view
// histogram, the all-reduced histogram, its certified and band stores and the
// counts it publishes to the other ranks through distributed shared memory).
// Two layouts, by CTAs per SM: one rank per SM (the rank's arrays after the
// arenas) or two (the rank's arrays inside arena B, which only rank 0 uses
// and only after the row's last remote access, so a rank fits in half an SM).
#pragma once

#include <cstddef>
#include <cstdint>

#include "block_primitives.cuh"
#include "cta_state.cuh"
#include "frontier.cuh"
#include "kernel_args.h"

// Thread-block clusters and distributed shared memory exist from sm_90 on. The
// library also compiles for sm_80, where the cluster kernel is an empty trap
// that never launches: ClusterOccupancy reports no clusters there, so the
// planner never picks the route.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define TOPK_HAS_CLUSTERS 1
#else
#define TOPK_HAS_CLUSTERS 0
#endif

namespace topk::cuda {

// What one rank publishes after its classification pass (read by every rank
// between the two cluster barriers that bracket the decision).
struct ClusterCounts {
  uint32_t certified;  // x >= t0 on the rank's segment
  uint32_t band;       // t1 <= x < t0
  uint32_t nan;
  uint32_t neg_min_key;  // ~(smallest admitted key), 0: none (PublishMinKey)
};

// Each rank's certified and band stores in shared memory; more spills to the
// rank's global slice (A part: certified, B part: band).
inline constexpr uint32_t kClusterRankStore = planner::kClusterRankStore;
// The rank's arrays: view histogram, all-reduced histogram, the two stores.
inline constexpr size_t kClusterRankArrayBytes = 4u * (2 * kCoarseBins + 4 * kClusterRankStore);

// Rank 0's refinement stores: the gathered frontier (A) and the next level
// (B). A row whose admitted set exceeds A is refined by re-scanning the row.
// Their policies: planner::kCluster1PerSm, kCluster2PerSm.
template <int kPerSm>
struct ClusterLayout {
  static_assert(kPerSm == 1 || kPerSm == 2, "1 or 2 CTAs per SM");
  static constexpr uint32_t kFrontierA =
      (kPerSm == 2 ? planner::kCluster2PerSm : planner::kCluster1PerSm).frontier_a;
  static constexpr uint32_t kFrontierB =
      (kPerSm == 2 ? planner::kCluster2PerSm : planner::kCluster1PerSm).frontier_b;
  static constexpr bool kArraysInArenaB =
      (kPerSm == 2 ? planner::kCluster2PerSm : planner::kCluster1PerSm).arrays_in_arena_b;
};
static_assert(ClusterLayout<2>::kFrontierA == kSmemCandidates &&
                  ClusterLayout<2>::kFrontierB == kSmemFrontier,
              "the 2-per-SM rank lays SelectRow's frontiers over its arenas");

template <int kPerSm>
constexpr size_t ClusterArenaBytes() {
  using Lay = ClusterLayout<kPerSm>;
  return 8u * static_cast<size_t>(Lay::kFrontierA + Lay::kFrontierB);
}
// Dynamic shared memory of a rank: SharedState, arenas A and B (index + key
// each), the rank's arrays unless they live in arena B, the counts.
template <int kPerSm>
constexpr size_t ClusterSharedBytes() {
  return sizeof(SharedState<kThreads>) + ClusterArenaBytes<kPerSm>() +
         (ClusterLayout<kPerSm>::kArraysInArenaB ? 0u : kClusterRankArrayBytes) +
         sizeof(ClusterCounts);
}
static_assert(ClusterSharedBytes<1>() <= 227u * 1024u, "one rank per SM");
static_assert(ClusterSharedBytes<2>() <= 112u * 1024u, "two ranks per SM");
static_assert(8u * ClusterLayout<2>::kFrontierB >= kClusterRankArrayBytes, "arrays in arena B");
// SelectRow (the rows rank 0 serves alone) lays the persistent variant's
// frontiers over the same arenas; the output sort reuses arena A.
static_assert(8u * (kSmemCandidates + kSmemFrontier) <= ClusterArenaBytes<2>(), "SelectRow fits");
static_assert(8u * kSmemOutput <= 8u * kSmemCandidates, "sort in arena A");

// A rank's arrays and counts (local pointers; other ranks map them with
// map_shared_rank, which keeps the offsets).
struct ClusterRank {
  uint32_t* view_hist;   // the rank's part of the view (or row) histogram
  uint32_t* total_hist;  // the cluster's sum, written by the ranks that own each bin slice
  uint32_t *cert_idx, *cert_key, *band_idx, *band_key;
  ClusterCounts* counts;
};
template <int kPerSm>
__device__ __forceinline__ ClusterRank MakeClusterRank(SharedState<kThreads>& s) {
  using Lay = ClusterLayout<kPerSm>;
  uint32_t* arena = FrontierArena(s);
  uint32_t* after = arena + 2 * (Lay::kFrontierA + Lay::kFrontierB);
  uint32_t* a = Lay::kArraysInArenaB ? arena + 2 * Lay::kFrontierA : after;
  uint32_t* counts = Lay::kArraysInArenaB ? after : after + kClusterRankArrayBytes / 4;
  constexpr uint32_t st = kClusterRankStore;
  return ClusterRank{a,
                     a + kCoarseBins,
                     a + 2 * kCoarseBins,
                     a + 2 * kCoarseBins + st,
                     a + 2 * kCoarseBins + 2 * st,
                     a + 2 * kCoarseBins + 3 * st,
                     reinterpret_cast<ClusterCounts*>(counts)};
}

}  // namespace topk::cuda
