// The state one CTA keeps in shared memory while it owns a row: the
// counters and histogram every phase shares (SharedState), and the frontier
// stores and output buffers laid out after it (CtaStores). Every route's
// kernel builds these once per CTA.
#pragma once

#include <cstddef>
#include <cstdint>

#include "block_primitives.cuh"
#include "frontier.cuh"
#include "kernel_args.h"
#include "workspace_layout.h"

namespace topk::cuda {

// A CTA's frontier stores and output buffers (MakeCtaStores).
struct CtaStores {
  Frontier fa, fb;
  uint32_t* out_buf;
  uint64_t* sort_buf;
};

// The CTA's shared state of the variant of kB threads (with the frontiers
// that follow it: about 104 KiB for two 512-thread CTAs per SM, under 56 KiB
// for four 256-thread CTAs).
template <int kB>
struct __align__(16) SharedState {
  static constexpr int kWarps = kB / 32;
  uint32_t hist[kCoarseBins];
  // Committed indices (K <= PersistentVariant<kB>::kOutput; larger K stage in
  // the CTA's global slice).
  uint32_t out[PersistentVariant<kB>::kOutput];
  BoundaryScratch scratch;
  uint32_t count;        // admitted candidates
  uint32_t spill;        // main pass: candidates in the CTA's global slice
  uint32_t neg_min_key;  // ~(smallest admitted key), 0: none (PublishMinKey)
  int hist_top;          // CommonKeyBits the level-0 histogram was built for
  // Main pass: per-warp segment counts, then their exclusive prefix with the
  // shared total S at [kWarps] (CompactSegments).
  uint32_t warp_count[kWarps + 1];
  uint32_t out_count;  // committed outputs
  uint32_t next_count;
  uint32_t tie_count;
  uint32_t nan;
  float t0, t1;
  long long next_row;
  // Thread 0's only: SelectRow's phase timer mark (no register lives
  // through the row for it).
  long long clock_mark;
  // Thread 0's only: the row's words of KernelParams::row_trace while it runs.
  unsigned long long* trace_row;
  // The call's arguments and the CTA's stores (ShareCtaArgs). SelectRow and
  // the phases take them by reference, so a copy on the kernel's stack would
  // live in local memory, and the L1 that caches it is the few KiB the
  // shared-memory carveout leaves: every read under load would be an L2 trip.
  DeviceArgs args;
  CtaStores stores;
  // The two stores Refine alternates between, the admitted set first, kept
  // here for it to read in shared memory (Refine's FrontierArg).
  Frontier refine[2];
};

// The frontiers' shared arrays follow the state in dynamic shared memory:
// A (indices, keys) x smem_candidates, then B x smem_frontier; at the end of a
// row the same bytes hold the output sort's 64-bit keys.
template <int kB>
__device__ __forceinline__ uint32_t* FrontierArena(SharedState<kB>& s) {
  return reinterpret_cast<uint32_t*>(&s + 1);
}

template <int kB>
__device__ __forceinline__ void ClearHist(SharedState<kB>& s) {
  for (uint32_t i = threadIdx.x; i < kCoarseBins; i += kB) s.hist[i] = 0u;
}

// The shared frontiers and the output buffers of the variant of kB threads:
// A and B in the arena after the state, overflowing to the CTA's slice; the
// committed indices and the sort in shared memory when no row can commit more
// than the variant's output capacity (min(K, N_cap) <= it), in the slice
// otherwise.
template <int kB>
__device__ __forceinline__ CtaStores MakeCtaStores(SharedState<kB>& s, const KernelParams& p) {
  using V = PersistentVariant<kB>;
  const uint32_t g = static_cast<uint32_t>(p.slice_entries);
  const CtaSlice slice{CtaSliceBase(p, blockIdx.x), g};
  uint32_t* arena = FrontierArena(s);
  constexpr uint32_t ca = V::kCandidates, cb = V::kFrontier;
  CtaStores c{Frontier{arena, arena + ca, ca, slice.AIdx(), slice.AKey(), g},
              Frontier{arena + 2 * ca, arena + 2 * ca + cb, cb, slice.BIdx(), slice.BKey(), g},
              s.out, reinterpret_cast<uint64_t*>(arena)};
  if (p.staged_k > V::kOutput) {
    // The slice holds min(K, N_cap) committed indices, then the sort.
    c.out_buf = slice.Out();
    c.sort_buf = slice.Sort(p.staged_k);
  }
  return c;
}

// Every kernel's prologue: the call's arguments (the block dev_args points
// to, if any) and the CTA's stores into s.args and s.stores. Every thread
// calls it; it synchronises.
template <int kB>
__device__ __forceinline__ void ShareCtaArgs(SharedState<kB>& s, const DeviceArgs& args_in,
                                             const DeviceArgs* dev_args, const KernelParams& p) {
  if (threadIdx.x == 0) {
    s.args = dev_args != nullptr ? *dev_args : args_in;
    s.stores = MakeCtaStores(s, p);
  }
  __syncthreads();
}

// Dynamic shared memory of the variant of kB threads: the state, then the
// frontier arena (A and B, index and key each).
template <int kB>
constexpr size_t VariantSharedBytes() {
  using V = PersistentVariant<kB>;
  return sizeof(SharedState<kB>) + 8u * static_cast<size_t>(V::kCandidates + V::kFrontier);
}
// Four small CTAs must fit an SM's 228 KiB (1 KiB of it reserved per CTA).
static_assert(VariantSharedBytes<kSmallThreads>() <= 56u * 1024u, "4 CTAs per SM");
static_assert(VariantSharedBytes<kThreads>() <= 112u * 1024u, "2 CTAs per SM");
// The output sort's keys reuse the frontier arena.
static_assert(8u * kSmallMaxK <= 8u * (kSmallCandidates + kSmallFrontier), "sort in the arena");

}  // namespace topk::cuda
