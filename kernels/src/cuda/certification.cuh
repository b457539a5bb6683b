// Certification (docs/design.md section 2, phase 2) on one CTA: the fused
// full-row pass that admits every x >= tau0 as a candidate and flags NaN, the
// compaction of its warp segments with the level-0 digit histogram, and the
// appending pass that serves the tau1 band and the KV-split segments.
#pragma once

#include <cstdint>

#include "admit_ring.cuh"
#include "block_primitives.cuh"
#include "cta_state.cuh"
#include "frontier.cuh"
#include "key_levels.cuh"
#include "topk/keys.h"

namespace topk::cuda {

// Phase 2, main pass: one pass over the valid row admitting x >= lo into the
// warp segments of f (seg = f.s_cap / kWarps entries each) and f's global
// slice, and flagging NaN. The compare is on raw floats: the cutoffs come
// from CoarseCutoff, so the admitted set is exactly a union of coarse bins.
// No digit histogram here: CompactSegments builds it from the stored keys.
// Writes each warp's segment count to warp_count[warp], the global entries'
// count to *spill and the smallest admitted key to *neg_min_key
// (PublishMinKey; both zeroed by the caller). kB: threads per CTA.
template <int kB, int kUnroll, typename Row>
__device__ __noinline__ void AdmitToSegments(const Row row, uint32_t L, float lo, const Frontier f,
                                             uint32_t* warp_count, uint32_t* spill,
                                             uint32_t* neg_min_key, uint32_t* nan_flag,
                                             bool prefetch) {
  unsigned nan = 0;
  uint32_t n = 0;  // warp-uniform
  uint32_t min_key = 0xFFFFFFFFu;
  const uint32_t seg = f.s_cap / (kB / 32);
  StreamAdmit<kB, kUnroll>(
      row, L, lo,
      [&](const auto& group, uint32_t idx0, unsigned m, unsigned nan_mask) {
        nan |= nan_mask;
        if (__any_sync(kFullMask, m != 0)) {
          AppendGroupToSegment(group, idx0, m, f, seg, n, spill, min_key);
        }
      },
      prefetch);
  if ((threadIdx.x & 31) == 0) warp_count[threadIdx.x >> 5] = n;
  PublishMinKey(min_key, neg_min_key);
  if (nan) *nan_flag = 1u;
}

// AdmitToSegments through the ring (same outputs).
template <int kB, typename Row>
__device__ __noinline__ void AdmitToSegmentsRing(const Row row, uint32_t L, float lo,
                                                 const Frontier f, uint32_t* warp_count,
                                                 uint32_t* spill, uint32_t* neg_min_key,
                                                 uint32_t* nan_flag, const AdmitRing<kB> ring) {
  unsigned nan = 0;
  uint32_t n = 0;  // warp-uniform
  uint32_t min_key = 0xFFFFFFFFu;
  const uint32_t seg = f.s_cap / (kB / 32);
  StreamAdmitRing<kB>(
      row, L, lo,
      [&](const auto& group, uint32_t idx0, unsigned m, unsigned nan_mask) {
        nan |= nan_mask;
        if (__any_sync(kFullMask, m != 0)) {
          AppendGroupToSegment(group, idx0, m, f, seg, n, spill, min_key);
        }
      },
      ring);
  if ((threadIdx.x & 31) == 0) warp_count[threadIdx.x >> 5] = n;
  PublishMinKey(min_key, neg_min_key);
  if (nan) *nan_flag = 1u;
}

// Moves the warp segments [w * seg, w * seg + n_w) of f's shared part to its
// front ([0, S)), counting the level-0 digit of every entry, the 11 key bits
// above bit shift0 (see Level0Shift), into hist (AggregatedCount).
// warp_count holds kWarps + 1 entries: the counts n_w on entry, their
// exclusive prefix (and S at [kWarps]) on exit. Every entry is read before any
// is written (entries only move down). Returns S. Synchronises on entry and
// exit. kB: threads per CTA; f.s_cap <= kCap, kCap a multiple of 2 * kB.
template <int kB, int kCap>
__device__ __noinline__ uint32_t CompactSegments(const Frontier f, uint32_t* warp_count, int shift0,
                                                 uint32_t* hist) {
  constexpr int kWarps = kB / 32;
  constexpr int kMaxPerThread = kCap / kB;
  static_assert(kMaxPerThread % 2 == 0 && kMaxPerThread * kB == kCap, "two equal rounds");
  const uint32_t seg = f.s_cap / kWarps;
  __syncthreads();
  if (threadIdx.x < 32) {
    const uint32_t lane = threadIdx.x;
    const uint32_t own = lane < kWarps ? warp_count[lane] : 0u;
    uint32_t incl = own;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const uint32_t y = __shfl_up_sync(kFullMask, incl, o);
      if (lane >= o) incl += y;
    }
    __syncwarp();
    if (lane < kWarps) warp_count[lane] = incl - own;
    if (lane == kWarps - 1) warp_count[kWarps] = incl;
  }
  __syncthreads();
  // Rounds of kPerRound slots per thread bound the registers; a round's
  // writes land below its own slots and on positions no other slot maps to,
  // so reading a round before writing it is enough.
  constexpr int kPerRound = kMaxPerThread / 2;
  for (int round = 0; round < kMaxPerThread / kPerRound; ++round) {
    uint32_t idx[kPerRound], key[kPerRound], dst[kPerRound];
#pragma unroll
    for (int r = 0; r < kPerRound; ++r) {
      const uint32_t slot = threadIdx.x + (round * kPerRound + r) * kB;
      const uint32_t w = min(slot / seg, static_cast<uint32_t>(kWarps - 1));
      const uint32_t off = slot - w * seg;
      const uint32_t base = warp_count[w];
      const bool ok = slot < f.s_cap && base + off < warp_count[w + 1];
      dst[r] = ok ? base + off : 0xFFFFFFFFu;
      idx[r] = ok ? f.s_idx[slot] : 0u;
      key[r] = ok ? f.s_key[slot] : 0u;
      AggregatedCount(ok, (key[r] >> shift0) & 0x7FFu, hist);
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kPerRound; ++r) {
      if (dst[r] != 0xFFFFFFFFu) {
        f.s_idx[dst[r]] = idx[r];
        f.s_key[dst[r]] = key[r];
      }
    }
    __syncthreads();
  }
  const uint32_t total = warp_count[kWarps];
  __syncthreads();
  return total;
}

// Phase 2, appending passes: admits x >= lo (kBand: lo <= x < hi) and
// appends to f through the shared count (the band pass after an underfilled
// main pass; kSegment: a KV-split segment CTA appending to its row's buffer).
// Also publishes the smallest admitted key to *neg_min_key (PublishMinKey).
template <int kB, bool kBand, bool kSegment = false, int kUnroll = 4, typename Row>
__device__ __noinline__ void AdmitPass(const Row row, uint32_t L, float lo, float hi,
                                       const Frontier f, uint32_t* count, uint32_t* neg_min_key,
                                       uint32_t* nan_flag, bool prefetch, uint32_t idx_base = 0) {
  unsigned nan = 0;
  uint32_t min_key = 0xFFFFFFFFu;
  StreamRowAtLeast<kB, kUnroll>(
      row, L, lo,
      [&](float4 v, uint32_t idx0, unsigned valid) {
        unsigned m = AtLeastMask(v, lo);
        if (kBand) m &= ~AtLeastMask(v, hi);
        m &= valid;
        nan |= NanMask(v) & valid;
        if (__any_sync(kFullMask, m != 0))
          AppendQuad(v, kSegment ? idx_base + idx0 : idx0, m, f, count, min_key);
      },
      prefetch);
  PublishMinKey(min_key, neg_min_key);
  if (nan) *nan_flag = 1u;
}

// The main admission pass at cutoff t: warp segments, then compaction and the
// level-0 histogram of the shared entries (for the candidates' common key
// bits, s.hist_top). On entry s.spill, s.neg_min_key and s.hist are zero (with
// a barrier since); on exit s.count is the admitted count (shared + global)
// and the shared part holds s.warp_count[kWarps] entries.
// kRing: the pass streams through the shared-memory ring (its early stages
// already issued), and the histogram it overwrote is cleared after it.
template <int kB, int kU, bool kRing = false, typename Row>
__device__ __forceinline__ void AdmitMain(SharedState<kB>& s, const Row& row, uint32_t L, float t,
                                          const Frontier& fa, bool prefetch,
                                          const AdmitRing<kB>* ring = nullptr) {
  if constexpr (kRing) {
    AdmitToSegmentsRing<kB>(row, L, t, fa, s.warp_count, &s.spill, &s.neg_min_key, &s.nan, *ring);
    __syncthreads();
    ClearHist(s);  // CompactSegments synchronises before counting into it
  } else {
    AdmitToSegments<kB, kU>(row, L, t, fa, s.warp_count, &s.spill, &s.neg_min_key, &s.nan,
                            prefetch);
  }
  __syncthreads();
  const int top = CommonKeyBits(~s.neg_min_key, Key32(t));
  const uint32_t shared = CompactSegments<kB, PersistentVariant<kB>::kCandidates>(
      fa, s.warp_count, Level0Shift(top), s.hist);
  if (threadIdx.x == 0) s.count = shared + s.spill, s.hist_top = top;
  __syncthreads();
}

// The admitted set as one frontier: the compacted shared part, then the
// global slice (the main pass's spill, then the band's entries).
template <int kB>
__device__ __forceinline__ Frontier AdmittedView(const SharedState<kB>& s, const Frontier& fa) {
  return Frontier{fa.s_idx, fa.s_key, s.warp_count[SharedState<kB>::kWarps],
                  fa.g_idx, fa.g_key, fa.g_cap};
}

}  // namespace topk::cuda
