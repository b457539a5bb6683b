// Proposal (docs/design.md section 2, phase 1) on one CTA: the coarse
// histogram of the row's strided view (SampleHistogram), and Propose, the
// boundary search over a view histogram that derives the cutoffs tau0 and
// tau1 (every sampled route: SelectRow, the KV-split segments, the cluster's
// ranks over their all-reduced histogram). CoarseCutoffPair is its cutoff
// step, which the short-row route shares for its exact boundary bin.
#pragma once

#include <cstdint>

#include "block_primitives.cuh"
#include "kernel_args.h"
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

// log2 of KernelParams::sample_run (1 or 8 consecutive positions per group).
__device__ __forceinline__ int SampleLog2Run(const KernelParams& p) {
  return p.sample_run == 8 ? 3 : 0;
}

struct NoStat {
  __device__ __forceinline__ void operator()() const {}
};

// The cutoffs of two coarse bins at once: warp 0 writes CoarseCutoff(bin_a)
// to *ta, warp 1 CoarseCutoff(bin_b) to *tb (threads = 64), or warp 0 alone
// (threads = 32; *tb untouched). Thread 0 runs on_a beside its write (a route
// statistic). No barrier: the caller's next one publishes the cutoffs.
template <typename OnA = NoStat>
__device__ __forceinline__ void CoarseCutoffPair(uint32_t threads, uint32_t bin_a, uint32_t bin_b,
                                                 float* ta, float* tb, OnA&& on_a = OnA{}) {
  const uint32_t tid = threadIdx.x;
  if (tid < threads) {
    const float t = WarpCoarseCutoff(tid < 32 ? bin_a : bin_b);
    if (tid == 0) *ta = t, on_a();
    if (tid == 32) *tb = t;
  }
}

// The proposal's boundary search over the view histogram hist: b0 for the
// quota q0 (tau0, the certified cutoff), b1 for q1 (tau1, the band's lower
// cutoff). Returns whether the view reaches q1; a view that does not cannot
// propose (the row takes the exact route). Synchronises on entry and exit.
template <int kB>
__device__ __forceinline__ bool ProposeBoundaries(const uint32_t* hist, uint32_t q0, uint32_t q1,
                                                  BoundaryScratch& scratch, Boundary* b0,
                                                  Boundary* b1) {
  FindBoundaries<kB>(hist, kCoarseBins, q0, q1, scratch, b0, b1);
  return b0->total >= q1;
}

// Propose (phase 1's decision) for rank k at stride s: the quotas
// (algorithm_constants.h), the boundary search, and, if the view proposes,
// the cutoffs tau0 = CoarseCutoff(b0.bin) into *t0 and tau1 =
// CoarseCutoff(b1.bin) into *t1 (CoarseCutoffPair of cutoff_threads; thread
// 0 runs on_sampled). Returns whether the view proposed; false: the exact
// route. Every thread calls it; no barrier after the cutoffs (the caller's
// next one publishes them). The cluster route, which hoists the quotas out
// of its row loop and computes the cutoffs under its own branch, composes
// ProposeBoundaries and CoarseCutoffPair itself.
template <int kB, typename OnSampled = NoStat>
__device__ __forceinline__ bool Propose(const uint32_t* hist, int32_t k, int stride,
                                        BoundaryScratch& scratch, uint32_t cutoff_threads,
                                        float* t0, float* t1, Boundary* b0, Boundary* b1,
                                        OnSampled&& on_sampled = OnSampled{}) {
  const uint32_t q0 = static_cast<uint32_t>(ProposalQuota(k, stride));
  const uint32_t q1 = static_cast<uint32_t>(RescueQuota(k, stride));
  if (!ProposeBoundaries<kB>(hist, q0, q1, scratch, b0, b1)) return false;
  CoarseCutoffPair(cutoff_threads, b0->bin, b1->bin, t0, t1, on_sampled);
  return true;
}

}  // namespace topk::cuda
