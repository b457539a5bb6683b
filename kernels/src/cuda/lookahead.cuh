// The look-ahead proposal (docs/design.md section 2, phase 1): the next row's
// view sampled beside this row's certification pass. The pass's loop calls
// the aside's Step() once per full step (block_primitives.cuh); each counts
// one view sample of the next row per thread into a coarse histogram in
// frontier B's shared indices (dead until this row's refinement). The aside
// keeps three registers (a pointer and a shared address): the pass's loop is
// at its register bound, so the row end, the stride and the type flag are
// read from the CTA's shared state every step.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cta_state.cuh"
#include "score_row.cuh"
#include "topk/algorithm_constants.h"
#include "topk/keys.h"

namespace topk::cuda {

// The look-ahead's view histogram: frontier B's shared indices (CtaStores).
template <int kB>
__device__ __forceinline__ uint32_t* LookaheadHist(SharedState<kB>& s) {
  return FrontierArena(s) + 2 * PersistentVariant<kB>::kCandidates;
}

__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Samples t = step * kB + threadIdx.x of the next row's view (the order of
// SampleHistogramOf), so after n steps the samples t < n * kB are counted and
// SampleHistogram(..., first = n * kB) adds the rest. t advances by kB, a
// multiple of the view's run, so a thread's position advances by kB * stride
// each step; a position past the row is past every later sample too.
template <int kB, typename Row>
struct SampleAside {
  const char* next;  // this thread's next sample
  uint32_t state;    // shared address of the CTA's SharedState

  // Thread 0, before the barrier that precedes the pass: the fields Step reads.
  __device__ __forceinline__ static void Publish(SharedState<kB>& s, const Row& row, uint32_t L,
                                                 int stride) {
    s.ahead_end = reinterpret_cast<unsigned long long>(row.p + L);
    s.ahead_step = static_cast<uint32_t>(kB) * static_cast<uint32_t>(stride) * Row::kBytes;
    s.ahead_fp16 = Row::kBytes == 2 ? HalfFlag(row) : 0u;
  }
  __device__ __forceinline__ SampleAside(SharedState<kB>& s, const Row& row, int64_t row_id,
                                         int stride, int log2_run)
      : state(SharedAddress(&s)) {
    const uint32_t run = 1u << log2_run;
    const uint32_t t = threadIdx.x;
    const uint32_t i = ((t >> log2_run) * static_cast<uint32_t>(stride) +
                        static_cast<uint32_t>(SamplePhase(row_id, stride)))
                           << log2_run |
                       (t & (run - 1));
    next = reinterpret_cast<const char*>(row.p + i);
  }
  __device__ __forceinline__ void Step() {
    unsigned long long end;
    asm volatile("ld.shared.u64 %0, [%1];"
                 : "=l"(end)
                 : "r"(state + static_cast<uint32_t>(offsetof(SharedState<kB>, ahead_end))));
    if (reinterpret_cast<unsigned long long>(next) < end) {
      float x;
      if constexpr (Row::kBytes == 4) {
        x = __ldcg(reinterpret_cast<const float*>(next));
      } else {
        const uint32_t h = __ldcg(reinterpret_cast<const unsigned short*>(next));
        uint32_t fp16;
        asm volatile("ld.shared.u32 %0, [%1];"
                     : "=r"(fp16)
                     : "r"(state + static_cast<uint32_t>(offsetof(SharedState<kB>, ahead_fp16))));
        x = fp16 ? Half16Row::WidenFp16(h) : Half16Row::WidenBf16(h);
      }
      if (!IsNan(x)) {
        const uint32_t bin = state + static_cast<uint32_t>(sizeof(SharedState<kB>)) +
                             8u * PersistentVariant<kB>::kCandidates + 4u * Coarse(x);
        asm volatile("red.shared.add.u32 [%0], 1;" ::"r"(bin) : "memory");
      }
      uint32_t step;
      asm volatile("ld.shared.u32 %0, [%1];"
                   : "=r"(step)
                   : "r"(state + static_cast<uint32_t>(offsetof(SharedState<kB>, ahead_step))));
      next += step;
    }
  }

 private:
  __device__ __forceinline__ static uint32_t HalfFlag(const F32Row&) { return 0u; }
  __device__ __forceinline__ static uint32_t HalfFlag(const Half16Row& row) { return row.fp16; }
};

}  // namespace topk::cuda
