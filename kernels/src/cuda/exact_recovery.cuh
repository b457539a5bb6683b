// Exact coarse recovery (docs/design.md section 2): the route of rows whose
// sample could not certify (or that skip the proposal). The coarse histogram
// of the whole row gives the bin tau* whose prefix reaches K, and its cutoff
// certifies by construction; the certification pass then admits against it.
#pragma once

#include <cstdint>

#include "block_primitives.cuh"
#include "certification.cuh"
#include "cta_state.cuh"
#include "frontier.cuh"
#include "topk/keys.h"

namespace topk::cuda {

// Exact coarse recovery, pass 1: the coarse histogram of the whole valid row
// (NaN flagged, not counted). Lanes with equal bins aggregate through
// AggregatedCount, so constant or one-bin rows do not serialise on one counter.
template <int kB, typename Row>
__device__ __noinline__ void CoarseHistPass(const Row row, uint32_t L, uint32_t* hist,
                                            uint32_t* nan_flag) {
  unsigned nan = 0;
  StreamRow<kB, 2>(row, L, [&](float4 v, uint32_t, unsigned valid) {
    const unsigned nm = NanMask(v) & valid;
    nan |= nm;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const bool ok = ((valid & ~nm) >> j) & 1u;
      AggregatedCount(ok, ok ? Coarse(Lane(v, j)) : 0u, hist);
    }
  });
  if (nan) *nan_flag = 1u;
}

// Exact coarse recovery: the coarse bin tau* whose prefix reaches K over the
// whole row gives a cutoff that certifies by construction. Leaves the admitted
// set in fa / s.hist like the sampled pass. Returns the cutoff.
template <int kB, int kU, typename Row>
__device__ __noinline__ float ExactCandidates(SharedState<kB>& s, const Row row, uint32_t L,
                                              uint32_t k, const Frontier& fa) {
  // Every thread has read the sampled pass's count (the need_exact decision)
  // before thread 0 resets it.
  __syncthreads();
  ClearHist(s);
  if (threadIdx.x == 0) s.count = 0u, s.spill = 0u, s.neg_min_key = 0u;
  __syncthreads();
  CoarseHistPass<kB>(row, L, s.hist, &s.nan);
  const Boundary bd = FindBoundary<kB>(s.hist, kCoarseBins, k, s.scratch);
  if (s.nan) return 0.f;
  if (threadIdx.x < 32) {
    const float t = WarpCoarseCutoff(bd.bin);
    if (threadIdx.x == 0) s.t0 = t;
  }
  ClearHist(s);
  __syncthreads();
  const float cut = s.t0;
  AdmitMain<kB, kU>(s, row, L, cut, fa, false);
  return cut;
}

}  // namespace topk::cuda
