// The shared memory of one rank of the resident decode route
// (decode_route.cu): the CTA state the shared phases use (SharedState: the
// level histogram, committed indices, boundary scratch), rank 0's gathered
// frontier, the rank's coarse histogram and the cluster's all-reduced one,
// the counts the rank publishes to the others and their totals, and the rank's part of the
// row as descending keys. Rank 0's next-level store lies over its own slice,
// which is dead once the gather has read it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cluster_state.cuh"
#include "cta_state.cuh"
#include "frontier.cuh"
#include "kernel_args.h"

namespace topk::cuda {

// The two CTA sizes (planner::kResident): few rows, and the band.
inline constexpr int kResidentThreads = planner::kResident.threads;
inline constexpr int kResidentWideThreads = planner::kResident.wide_threads;
static_assert(kResidentThreads == kThreads, "the 512-thread CTA is the shared phases' state");
inline constexpr uint32_t kResidentFrontierA = planner::kResident.frontier_a;
inline constexpr uint32_t kResidentFrontierB = planner::kResident.frontier_b;
inline constexpr uint32_t kResidentMaxSliceKeys = planner::kResident.max_slice_keys;

// What a rank publishes after loading its slice (read by every rank between
// the two barriers that bracket the all-reduce), and rank 0's gather count.
struct ResidentCounts {
  uint32_t nan;
  uint32_t gathered;     // rank 0: frontier entries pushed so far
  uint32_t list_offset;  // the rank's first slot in the ranked bin's list
  uint32_t pad;
};
// The rank's own words: the row's counts over every rank, and the gather's
// per-warp slots (committed, then frontier).
struct ResidentTotals {
  uint32_t nan;
  uint32_t pad;
  uint32_t gather[2 * (kResidentWideThreads / 32 + 1)];  // either CTA size
};
static_assert(sizeof(ResidentTotals) % 16 == 0, "the slice stays 16-byte aligned");

// The slice region's words: the rank's keys, or (rank 0, after the gather)
// the next-level store, whichever is larger.
__host__ __device__ constexpr uint32_t ResidentSliceWords(uint32_t slice_keys) {
  const uint32_t store = 2u * kResidentFrontierB;
  const uint32_t keys = (slice_keys + 3u + 3u) / 4u * 4u;  // up to 3 words of skew
  return keys > store ? keys : store;
}
template <int kB>
__host__ __device__ constexpr size_t ResidentFixedBytes() {
  return sizeof(SharedState<kB>) + 8u * kResidentFrontierA + 8u * kCoarseBins +
         sizeof(ResidentCounts) + sizeof(ResidentTotals);
}
template <int kB>
__host__ __device__ constexpr size_t ResidentSharedBytes(uint32_t slice_keys) {
  return ResidentFixedBytes<kB>() + 4u * ResidentSliceWords(slice_keys);
}
static_assert(ResidentSharedBytes<kResidentThreads>(kResidentMaxSliceKeys) <= 227u * 1024u,
              "one rank per SM");
static_assert(ResidentSharedBytes<kResidentWideThreads>(kResidentMaxSliceKeys) <= 227u * 1024u,
              "one rank per SM");
// The output sort (pow2(K) 64-bit keys) reuses frontier A.
static_assert(8u * kSmemOutput <= 8u * kResidentFrontierA, "sort in frontier A");

// A rank's regions, as local pointers (other ranks map them with
// map_shared_rank, which keeps the offsets).
struct ResidentRank {
  uint32_t* frontier_a;  // rank 0: indices [0, FA), keys [FA, 2 FA)
  uint32_t* view_hist;   // the coarse histogram of the rank's slice
  uint32_t* total_hist;  // the cluster's sum
  ResidentCounts* counts;
  ResidentTotals* totals;
  uint32_t* keys;  // the slice; rank 0's frontier B after the gather
};
template <int kB>
__device__ __forceinline__ ResidentRank MakeResidentRank(SharedState<kB>& s) {
  uint32_t* a = reinterpret_cast<uint32_t*>(&s + 1);
  uint32_t* hists = a + 2 * kResidentFrontierA;
  auto* counts = reinterpret_cast<ResidentCounts*>(hists + 2 * kCoarseBins);
  auto* totals = reinterpret_cast<ResidentTotals*>(counts + 1);
  return ResidentRank{a,      hists,  hists + kCoarseBins,
                      counts, totals, reinterpret_cast<uint32_t*>(totals + 1)};
}

// Rank 0's two refinement stores, shared memory only (the route keeps no
// per-CTA slices in the workspace).
__device__ __forceinline__ Frontier ResidentFrontierA(uint32_t* base) {
  return Frontier{base, base + kResidentFrontierA, kResidentFrontierA, nullptr, nullptr, 0};
}
__device__ __forceinline__ Frontier ResidentFrontierB(uint32_t* base) {
  return Frontier{base, base + kResidentFrontierB, kResidentFrontierB, nullptr, nullptr, 0};
}

}  // namespace topk::cuda
