// The row orchestrator every route shares (docs/design.md section 2): one
// CTA takes one row through proposal, certification (with the tau1 band and
// exact recovery as fallbacks), refinement and output, and counts which path
// the row took. The persistent route calls it for every row it claims; the
// KV-split route for the rows its split cannot serve.
#pragma once

#include <cstdint>

#include "block_primitives.cuh"
#include "certification.cuh"
#include "cta_state.cuh"
#include "exact_recovery.cuh"
#include "frontier.cuh"
#include "kernel_args.h"
#include "output.cuh"
#include "proposal.cuh"
#include "refinement.cuh"
#include "row_scope.cuh"
#include "score_row.cuh"
#include "topk/algorithm_constants.h"
#include "topk/contract.h"
#include "topk/keys.h"

namespace topk::cuda {

// 4 float4 loads in flight per thread in the certification pass in both
// variants (their policies, route_policies.h): both run 1024 threads per SM
// at 64 registers.
inline constexpr int kAdmitUnroll = PersistentVariant<kThreads>::kAdmitUnroll;
static_assert(PersistentVariant<kSmallThreads>::kAdmitUnroll == kAdmitUnroll, "one unroll");

// Selects row r into a.indices (and a.row_status) on one CTA of kB threads
// with kU loads in flight per thread in the certification pass, reading the
// row through the view Row (score_row.cuh). fa and fb
// are the frontier stores, out_buf / sort_buf the output staging (CtaStores).
// Every thread of the CTA calls it; it synchronises on exit. kRing: the main
// certification pass streams through the shared-memory ring (AdmitRing; fb
// and the output as MakeCtaStores lays them out: the persistent route). A
// template argument, not a run-time flag: carrying both passes in one body
// costs the rows without the ring registers (spills) in the proposal.
template <int kB, int kU, typename Row, bool kRing = false>
__device__ __noinline__ void SelectRow(SharedState<kB>& s, const DeviceArgs& a,
                                       const KernelParams& p, int64_t r, const Frontier& fa,
                                       const Frontier& fb, uint32_t* out_buf, uint64_t* sort_buf) {
  const uint32_t tid = threadIdx.x;
  const uint32_t k = static_cast<uint32_t>(p.k);
  const RowScope scope{a, p, r, k};
  const Row row = RowOf<Row>(a, p, r);
  const int64_t length = a.lengths[r];
  if (scope.FailBadLength<kB>(length)) return;
  const uint32_t L = static_cast<uint32_t>(length);
  if (tid == 0) s.out_count = 0u, s.nan = 0u, s.count = 0u, s.spill = 0u, s.neg_min_key = 0u;
  ClearHist(s);
  __syncthreads();
  // Phase timers (tid 0's clock after each phase's closing barrier) and,
  // with p.row_trace, the row's start and end on the global timer
  // (TraceStamp; stamps between the phases cost the pass registers).
  const PhaseClock clock{p, s.clock_mark};
  clock.Start();
  if (tid == 0 && p.row_trace != nullptr) {
    // Kept in shared memory: no register lives through the row for it.
    s.trace_row = scope.Trace();
    TraceStamp(s.trace_row, kTraceStart);
  }
  uint32_t count;
  if (L <= k) {
    TakeWholeRow<kB>(row, L, out_buf, &s.nan);
    count = L;
  } else {
    bool need_exact = true;
    float cut = 0.f;
    if (p.sample_stride > 0 && L >= p.min_sampled_length) {
      const int stride = p.sample_stride;
      [[maybe_unused]] const AdmitRing<kB> admit_ring = MakeAdmitRing(s, fb);
      if constexpr (kRing) RingIssueEarly<kB>(row, L, admit_ring);
      // The certification pass's first chunks stream into L2 during the
      // latency-bound proposal.
      if (p.prefetch != 0 && tid == 0) PrefetchRowHead<kB>(row, L);
      SampleHistogram<kB>(row, L, r, stride, SampleLog2Run(p), s.hist);
      Boundary b0, b1;
      if (Propose<kB>(s.hist, p.k, stride, s.scratch, 64u, &s.t0, &s.t1, &b0, &b1,
                      [&] { AddStat(p, Stat::kSampled, 1); })) {
        ClearHist(s);
        __syncthreads();
        clock.Lap(Stat::kCyclesProposal);
        const float t0 = s.t0, t1 = s.t1;
        AdmitMain<kB, kU, kRing>(s, row, L, t0, fa, p.prefetch != 0, &admit_ring);
        // The band pass below adds to s.count and may set s.nan: every warp
        // reads both before any warp can take that branch, so the whole CTA
        // takes the same branch and reaches the same barriers.
        const uint32_t admitted = s.count;
        const bool main_nan = s.nan != 0u;
        __syncthreads();
        if (!main_nan) {
          if (admitted >= k) {
            need_exact = false;
            cut = t0;
            if (tid == 0) AddStat(p, Stat::kCertified, 1);
          } else if (b1.bin > b0.bin) {
            // Underfill: append the band t1 <= x < t0 and re-certify.
            AdmitPass<kB, true, false, kU>(row, L, t1, t0, AdmittedView(s, fa), &s.count,
                                           &s.neg_min_key, &s.nan, false);
            __syncthreads();
            if (s.count >= k) {
              need_exact = false;
              cut = t1;
              if (tid == 0) AddStat(p, Stat::kBandRescued, 1);
            }
          }
          if (need_exact && tid == 0) AddStat(p, Stat::kExactRecovery, 1);
        }
      } else if constexpr (kRing) {
        // No ring pass: the early stages land before anything writes frontier
        // B or the output (ExactCandidates synchronises on entry).
        CpAsyncWaitAll();
      }
    }
    if (need_exact && !s.nan) {
      if (tid == 0) AddStat(p, Stat::kExactRows, 1);
      cut = ExactCandidates<kB, kU>(s, row, L, k, fa);
    }
    clock.Lap(Stat::kCyclesAdmit);
    if (!s.nan) {
      const uint32_t C = s.count;
      if (tid == 0) s.refine[0] = AdmittedView(s, fa), s.refine[1] = fb;
      __syncthreads();
      const int top = FinishLevel0Hist(s, row, L, cut, s.refine[0], C);
      const uint32_t rescans = Refine<kB, SharedState<kB>, Row, const Frontier&>(
          s, row, L, cut, NoUpperBound(), C, s.refine[0], s.refine[1], k, p.deterministic != 0, top,
          RefineOut{out_buf, &s.out_count});
      if (tid == 0) CountRefinedRow(p, C, rescans);
    }
    __syncthreads();
    count = s.out_count;
    clock.Lap(Stat::kCyclesRefine);
  }
  if (s.nan) {
    scope.Fail<kB>(RowStatus::kNan);
  } else {
    scope.Finalize<kB>(row, out_buf, count, scope.Out(), sort_buf);
    scope.Status(RowStatus::kOk);
  }
  __syncthreads();
  clock.Lap(Stat::kCyclesFinalize);
  if (tid == 0 && p.row_trace != nullptr) TraceStamp(s.trace_row, kTraceFinalize);
}

}  // namespace topk::cuda
