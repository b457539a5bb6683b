// Proposal (docs/design.md section 2, phase 1) on one CTA: the coarse
// histogram of the row's strided view, from which the boundary search
// (FindBoundaries) and WarpCoarseCutoff derive the cutoffs tau0 and tau1.
#pragma once

#include <cstdint>

#include "block_primitives.cuh"
#include "topk/algorithm_constants.h"
#include "topk/keys.h"

namespace topk::cuda {

// Phase 1: the coarse histogram of the row's view. View: groups of `run`
// consecutive positions starting at run * a_r in every block of run * s
// positions (run == 1 is the paper's i = a_r mod s); about L / s samples.
// 16 loads in flight per thread (a 1M row's 16K samples in two round trips);
// plain shared atomics: the samples spread over many bins, and any warp-level
// aggregation measured slower here (bench/NOTES.md).
// The sampling loop on a view whose element type is fixed at compile time
// (WithTypedRow), so the 16 loads issue before any value is widened.
template <int kB, typename TypedRow>
__device__ __forceinline__ void SampleHistogramOf(const TypedRow& row, uint32_t L, int64_t row_id,
                                                  int stride, int log2_run, uint32_t* hist) {
  const uint32_t run = 1u << log2_run;
  const uint32_t group = static_cast<uint32_t>(stride) << log2_run;
  const uint32_t offset = static_cast<uint32_t>(SamplePhase(row_id, stride)) << log2_run;
  const uint32_t total = (L + group - 1) / group * run;
  constexpr int kUnroll = 16;
  for (uint32_t t0 = 0; t0 < total; t0 += kB * kUnroll) {
    float x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t t = t0 + u * kB + threadIdx.x;
      const uint32_t i = (t >> log2_run) * group + offset + (t & (run - 1));
      x[u] = t < total && i < L ? row.At(i) : BitsToFloat(0x7FC00000u);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (!IsNan(x[u])) atomicAdd(&hist[Coarse(x[u])], 1u);
    }
  }
}

template <int kB, typename Row>
__device__ __noinline__ void SampleHistogram(const Row row, uint32_t L, int64_t row_id, int stride,
                                             int log2_run, uint32_t* hist) {
  WithTypedRow(row, [&](const auto& typed) {
    SampleHistogramOf<kB>(typed, L, row_id, stride, log2_run, hist);
  });
}

}  // namespace topk::cuda
