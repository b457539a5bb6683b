// The row scope every route kernel shares: what one row costs besides the
// algorithm's phases. Its guard (a length outside [0, width] has no answer),
// its status word and empty output, the route statistics and phase timers
// (Stat), the row trace (KernelParams::row_trace) and the whole-row answer of
// a row no longer than K. The four kernels (SelectRow, the short-row,
// KV-split and cluster kernels) compose these instead of restating them.
// Everything here is __forceinline__: the kernels' codegen is the same as
// with the statements written in place.
#pragma once

#include <cstdint>

#include "kernel_args.h"
#include "output.cuh"
#include "topk/contract.h"
#include "topk/keys.h"

namespace topk::cuda {

__device__ __forceinline__ unsigned long long GlobalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Diagnostics (KernelParams::row_trace): stamps word w of a row's trace
// words t with the global timer; the start also records the SM and, with
// cycles (one CTA runs the whole row), the clock, which the row's end turns
// into the row's cycles.
static __device__ __forceinline__ void TraceStamp(unsigned long long* t, int w,
                                                  bool cycles = true) {
  t[w] = GlobalTimerNs();
  if (w == kTraceStart) {
    uint32_t sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    t[kTraceSm] = sm;
    if (cycles) t[kTraceCycles] = static_cast<unsigned long long>(clock64());
  } else if (w == kTraceFinalize && cycles) {
    t[kTraceCycles] = static_cast<unsigned long long>(clock64()) - t[kTraceCycles];
  }
}

// One route counter of the workspace (none without a stats array).
__device__ __forceinline__ void AddStat(const KernelParams& p, Stat stat, unsigned long long v) {
  if (p.stats != nullptr) atomicAdd(&p.stats[static_cast<int>(stat)], v);
}

// The counters of a row that went through refinement: one row, its
// candidates, and the re-scans its levels needed (if any). Thread 0 calls it.
__device__ __forceinline__ void CountRefinedRow(const KernelParams& p, uint32_t candidates,
                                                uint32_t rescans) {
  AddStat(p, Stat::kRows, 1);
  AddStat(p, Stat::kCandidates, candidates);
  if (rescans) AddStat(p, Stat::kRescans, rescans);
}

// Row r's trace words (KernelParams::row_trace, which must be set).
__device__ __forceinline__ unsigned long long* RowTrace(const KernelParams& p, int64_t r) {
  return p.row_trace + r * kTraceWords;
}

// Row r of a launch: its output slots, status and trace words. Built per row
// from references to the call's arguments and the plan's constants (both in
// shared or parameter memory), r, and the kernel's k (= p.k, the value the
// kernel already holds: re-reading p.k would change its code).
struct RowScope {
  const DeviceArgs& a;
  const KernelParams& p;
  int64_t r;
  uint32_t k;

  // The row's K output slots. Formed where they are written: a pointer live
  // through the row would cost the phases registers.
  __device__ __forceinline__ int32_t* Out() const {
    return a.indices + r * static_cast<int64_t>(k);
  }
  // The guard: a length outside [0, width] is the caller's error, and the
  // row gets no answer (kBadLength, every slot empty). Returns whether it
  // failed the row. (The test and its action in one place: a bool-valued
  // test alone would compile to a materialised predicate.)
  template <int kB>
  __device__ __forceinline__ bool FailBadLength(int64_t length, int32_t* out_row) const {
    if (length < 0 || length > a.width) {
      Fail<kB>(out_row, RowStatus::kBadLength);
      return true;
    }
    return false;
  }
  template <int kB>
  __device__ __forceinline__ bool FailBadLength(int64_t length) const {
    if (length < 0 || length > a.width) {
      Fail<kB>(RowStatus::kBadLength);
      return true;
    }
    return false;
  }
  // The row's status word; SetStatus is for a caller that is thread 0 already.
  __device__ __forceinline__ void SetStatus(RowStatus st) const {
    if (a.row_status) a.row_status[r] = st;
  }
  __device__ __forceinline__ void Status(RowStatus st) const {
    if (threadIdx.x == 0) SetStatus(st);
  }
  // A row with no answer (kBadLength, kNan): every slot empty, and its status.
  template <int kB>
  __device__ __forceinline__ void Fail(int32_t* out_row, RowStatus st) const {
    FillEmpty<kB>(out_row, k);
    Status(st);
  }
  template <int kB>
  __device__ __forceinline__ void Fail(RowStatus st) const {
    Fail<kB>(Out(), st);
  }
  // Writes the row's count committed indices (out_buf) into out_row, sorted
  // or in index order as the plan asks, padded with the empty slot.
  template <int kB, typename Row>
  __device__ __forceinline__ void Finalize(const Row row, const uint32_t* out_buf, uint32_t count,
                                           int32_t* out_row, uint64_t* sort_buf) const {
    FinalizeRow<kB>(row, out_buf, count, out_row, k, p.sorted != 0, p.deterministic != 0, sort_buf);
  }
  __device__ __forceinline__ unsigned long long* Trace() const { return RowTrace(p, r); }
};

// The phase timers (Stat::kCycles*): thread 0's clock after each phase's
// closing barrier, as the cycles since the previous lap. mark is where the
// previous lap's clock is kept: shared memory in the one-CTA kernels (no
// register lives through the row for it), a local in the cluster kernel.
struct PhaseClock {
  const KernelParams& p;
  long long& mark;

  __device__ __forceinline__ void Start() const {
    if (threadIdx.x == 0) mark = clock64();
  }
  __device__ __forceinline__ void Lap(Stat st) const {
    if (threadIdx.x == 0) {
      const long long now = clock64();
      AddStat(p, st, static_cast<unsigned long long>(now - mark));
      mark = now;
    }
  }
};

// A row of L <= K values is its own answer: indices 0..L-1 into out_buf,
// with a scan for NaN (which voids the row: *nan_flag). Every thread calls
// it; it synchronises.
template <int kB, typename Row>
__device__ __forceinline__ void TakeWholeRow(const Row& row, uint32_t L, uint32_t* out_buf,
                                             uint32_t* nan_flag) {
  unsigned nan = 0;
  for (uint32_t i = threadIdx.x; i < L; i += kB) {
    out_buf[i] = i;
    nan |= IsNan(row.At(i)) ? 1u : 0u;
  }
  if (nan) *nan_flag = 1u;
  __syncthreads();
}

}  // namespace topk::cuda
