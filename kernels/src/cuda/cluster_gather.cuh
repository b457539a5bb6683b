// The cluster route's gather (docs/design.md section 3): after the decision
// every rank pushes its admitted entries (certified, then band when the band
// is needed) into rank 0's frontier A through distributed shared memory, at
// offsets from the all-reduced counts, and adds their level-0 digits to rank
// 0's histogram, so rank 0 starts refinement with the whole frontier and its
// histogram in its own shared memory.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "block_primitives.cuh"
#include "frontier.cuh"
#include "key_levels.cuh"

namespace topk::cuda {

// Pushes entries [0, n) of src to dst positions [at, at + n) and counts
// their level-0 digit (key >> shift0, 11 bits) into hist (rank 0's, remote
// for the other ranks). dst has no global part: the caller gathers only
// when the whole frontier fits. Every thread of the CTA calls it.
template <int kB>
__device__ __noinline__ void PushToLeader(const Frontier src, uint32_t n, const Frontier dst,
                                          uint32_t at, int shift0, uint32_t* hist) {
  for (uint32_t base = 0; base < n; base += kB) {
    const uint32_t i = base + threadIdx.x;
    const bool ok = i < n;
    uint32_t idx = 0, key = 0;
    if (ok) {
      src.Get(i, idx, key);
      dst.Put(at + i, idx, key);
    }
    AggregatedCount(ok, (key >> shift0) & 0x7FFu, hist);
  }
}

}  // namespace topk::cuda
