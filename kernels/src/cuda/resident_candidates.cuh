// The resident route's ranked boundary bin (decode_route.cu, step 3 when the
// boundary bin is small): instead of gathering the bin into rank 0 and
// refining it there by radix levels (a 2048-bin scan and its barriers on one
// CTA while the others wait), every rank sends its entries of the bin to
// every rank (a few stores each, no reply awaited), and after one cluster
// barrier each rank ranks its own entries among all of them by (key, index)
// and writes those that make the K: the K-th value's tie-break and the output
// positions come from the rank itself, so no rank waits on another's
// refinement. The values above the bin are written as the gather writes them.
// Each rank's slots in the shared list come from the bin's count in every
// rank's histogram (read remotely, in one round trip), not from an atomic.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "block_primitives.cuh"
#include "resident_gather.cuh"
#include "resident_state.cuh"

namespace topk::cuda {
#if TOPK_HAS_CLUSTERS

// Entries of the bin shared with every rank (64-bit (key, index) words in
// the rank's frontier A region, which only rank 0's gathered frontier uses).
inline constexpr uint32_t kResidentCandidates = planner::kResident.candidates;
// Two words an entry in frontier A's 2 kResidentFrontierA words.
static_assert(kResidentCandidates <= kResidentFrontierA, "the list fits frontier A");

// The (key, index) word the ranking orders: the key first, ties by index
// (the lowest indices among equal keys make the K, as deterministic rows
// need).
__device__ __forceinline__ uint64_t CandidateWord(uint32_t key, uint32_t idx) {
  return (static_cast<uint64_t>(key) << 32) | idx;
}

// This rank's first slot in the shared list: the bin's entries in the ranks
// before it (their view histograms' bin b, intact until the row's next
// cluster barrier). Warp 0 calls it; lane 0 writes *first.
__device__ __forceinline__ void CandidateOffset(const uint32_t* view_hist, uint32_t b,
                                                uint32_t* first) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const uint32_t lane = threadIdx.x & 31;
  const uint32_t me = cluster.block_rank();
  const uint32_t n = lane < me ? cluster.map_shared_rank(view_hist, lane)[b] : 0u;
  const uint32_t before = __reduce_add_sync(kFullMask, n);
  if (lane == 0) *first = before;
}

// Every rank, after the boundary: the committed indices (key < first) into
// out at slots reserved on *out_count, and the bin's entries (first <= key
// <= last) into every rank's list at this rank's slots, from *offset (a
// shared word CandidateOffset wrote before the call). The caller's cluster
// barrier completes the lists. scratch: 2 (kB / 32 + 1) words.
template <int kB>
__device__ __noinline__ void ShareResidentCandidates(const uint32_t* keys, uint32_t len,
                                                     uint32_t beg, uint32_t first, uint32_t last,
                                                     uint32_t* out, uint32_t* out_count,
                                                     uint64_t* list, const uint32_t* offset,
                                                     uint32_t* scratch) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const uint32_t ranks = cluster.num_blocks();
  // The band's CTA reads its keys four at a time (VisitKeys).
  constexpr bool kGrouped = kB == kResidentWideThreads;
  const GatherSlots slots = ReserveGatherSlots<kB, kGrouped>(keys, len, first, last, true,
                                                             out_count, nullptr, offset, scratch);
  uint32_t out_pos = slots.out_pos;
  uint32_t pos = slots.f_pos;
  VisitKeys<kB, kGrouped>(keys, len, [&](uint32_t i, uint32_t key) {
    if (key < first) {
      out[out_pos++] = beg + i;
    } else if (key <= last) {
      const uint64_t word = CandidateWord(key, beg + i);
      if (ranks == 1) {
        list[pos] = word;  // a lone rank's own list, not through the cluster window
      } else {
        for (uint32_t q = 0; q < ranks; ++q) cluster.map_shared_rank(list, q)[pos] = word;
      }
      ++pos;
    }
  });
}

// After the barrier that completed the list of `total` entries: this rank's
// entries [offset, offset + n) ranked among all of them, a warp each; the
// `need` smallest go to out[below + rank]. Every thread calls it.
template <int kB>
__device__ __noinline__ void CommitResidentCandidates(const uint64_t* list, uint32_t total,
                                                      uint32_t offset, uint32_t n, uint32_t need,
                                                      uint32_t* out, uint32_t below) {
  const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (uint32_t e = warp; e < n; e += kB / 32) {
    const uint64_t mine = list[offset + e];
    uint32_t rank = 0;
    for (uint32_t j = lane; j < total; j += 32) rank += list[j] < mine ? 1u : 0u;
    rank = __reduce_add_sync(kFullMask, rank);
    if (lane == 0 && rank < need) out[below + rank] = static_cast<uint32_t>(mine);
  }
}

#endif  // TOPK_HAS_CLUSTERS
}  // namespace topk::cuda
