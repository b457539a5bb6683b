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

// The tau1 band kept apart in the main pass (KernelParams::band_apart): the
// pass streams at lo = t1, appends x >= hi = t0 to the warp segments as
// before and lo <= x < hi to f (frontier B's global slice: s_cap 0) through
// *count, publishing the band's smallest key to *neg_min_key. Entries past
// f's capacity are dropped (the count shows it).
struct BandApart {
  Frontier f;
  float lo, hi;
  uint32_t* count;
  uint32_t* neg_min_key;
};

// One group of the main pass: x >= t0 to the warp's segment; with kBand
// (lo <= x < hi) to band.f. Called warp-uniformly.
template <bool kBand, typename G>
__device__ __forceinline__ void AdmitGroupToSegment(const G& group, uint32_t idx0, unsigned m,
                                                    const Frontier& f, uint32_t seg, uint32_t& n,
                                                    uint32_t* spill, uint32_t& min_key,
                                                    const BandApart& band, uint32_t& band_min) {
  if constexpr (kBand) {
    const unsigned m0 = m != 0u ? m & GroupAtLeast(group, band.hi) : 0u;
    const unsigned m1 = m & ~m0;
    if (__any_sync(kFullMask, m0 != 0u)) {
      AppendGroupToSegment(group, idx0, m0, f, seg, n, spill, min_key);
    }
    if (__any_sync(kFullMask, m1 != 0u))
      AppendGroupShared(group, idx0, m1, band.f, band.count, band_min);
  } else {
    if (__any_sync(kFullMask, m != 0u)) {
      AppendGroupToSegment(group, idx0, m, f, seg, n, spill, min_key);
    }
  }
}

// Phase 2, main pass: one pass over the valid row admitting x >= lo into the
// warp segments of f (seg = f.s_cap / kWarps entries each) and f's global
// slice, and flagging NaN. The compare is on raw floats: the cutoffs come
// from CoarseCutoff, so the admitted set is exactly a union of coarse bins.
// No digit histogram here: CompactSegments builds it from the stored keys.
// Writes each warp's segment count to warp_count[warp], the global entries'
// count to *spill and the smallest admitted key to *neg_min_key
// (PublishMinKey; both zeroed by the caller). kB: threads per CTA. kBand:
// lo is band.lo (t1) and the segments take x >= band.hi (t0) only, the band
// goes to band.f (BandApart). kRing: through the shared-memory ring
// (StreamAdmitRing) instead of register loads (ring unused otherwise).
template <int kB, int kUnroll, bool kBand, bool kRing, typename Row>
__device__ __forceinline__ void AdmitToSegmentsBody(const Row& row, uint32_t L, float lo,
                                                    const Frontier& f, uint32_t* warp_count,
                                                    uint32_t* spill, uint32_t* neg_min_key,
                                                    uint32_t* nan_flag, bool prefetch,
                                                    const AdmitRing<kB>& ring,
                                                    const BandApart& band) {
  unsigned nan = 0;
  uint32_t n = 0;  // warp-uniform
  uint32_t min_key = 0xFFFFFFFFu, band_min = 0xFFFFFFFFu;
  const uint32_t seg = f.s_cap / (kB / 32);
  auto admit = [&](const auto& group, uint32_t idx0, unsigned m, unsigned nan_mask) {
    nan |= nan_mask;
    AdmitGroupToSegment<kBand>(group, idx0, m, f, seg, n, spill, min_key, band, band_min);
  };
  if constexpr (kRing) {
    StreamAdmitRing<kB>(row, L, lo, admit, ring);
  } else {
    StreamAdmit<kB, kUnroll>(row, L, lo, admit, prefetch);
  }
  if ((threadIdx.x & 31) == 0) warp_count[threadIdx.x >> 5] = n;
  PublishMinKey(min_key, neg_min_key);
  if constexpr (kBand) PublishMinKey(band_min, band.neg_min_key);
  if (nan) *nan_flag = 1u;
}

template <int kB, int kUnroll, typename Row>
__device__ __noinline__ void AdmitToSegments(const Row row, uint32_t L, float lo, const Frontier f,
                                             uint32_t* warp_count, uint32_t* spill,
                                             uint32_t* neg_min_key, uint32_t* nan_flag,
                                             bool prefetch) {
  AdmitToSegmentsBody<kB, kUnroll, false, false>(row, L, lo, f, warp_count, spill, neg_min_key,
                                                 nan_flag, prefetch, AdmitRing<kB>{}, BandApart{});
}

// AdmitToSegments through the ring (same outputs).
template <int kB, typename Row>
__device__ __noinline__ void AdmitToSegmentsRing(const Row row, uint32_t L, float lo,
                                                 const Frontier f, uint32_t* warp_count,
                                                 uint32_t* spill, uint32_t* neg_min_key,
                                                 uint32_t* nan_flag, const AdmitRing<kB> ring) {
  AdmitToSegmentsBody<kB, 1, false, true>(row, L, lo, f, warp_count, spill, neg_min_key, nan_flag,
                                          false, ring, BandApart{});
}

// AdmitToSegments / AdmitToSegmentsRing with the band kept
// apart (kBand of AdmitToSegmentsBody): separate functions, so that the
// passes without the band keep their registers.
template <int kB, int kUnroll, typename Row>
__device__ __noinline__ void AdmitToSegmentsBand(const Row row, uint32_t L, const Frontier f,
                                                 uint32_t* warp_count, uint32_t* spill,
                                                 uint32_t* neg_min_key, uint32_t* nan_flag,
                                                 bool prefetch, const BandApart band) {
  AdmitToSegmentsBody<kB, kUnroll, true, false>(row, L, band.lo, f, warp_count, spill, neg_min_key,
                                                nan_flag, prefetch, AdmitRing<kB>{}, band);
}
template <int kB, typename Row>
__device__ __noinline__ void AdmitToSegmentsBandRing(const Row row, uint32_t L, const Frontier f,
                                                     uint32_t* warp_count, uint32_t* spill,
                                                     uint32_t* neg_min_key, uint32_t* nan_flag,
                                                     const AdmitRing<kB> ring,
                                                     const BandApart band) {
  AdmitToSegmentsBody<kB, 1, true, true>(row, L, band.lo, f, warp_count, spill, neg_min_key,
                                         nan_flag, false, ring, band);
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
// ring: the pass streams through the shared-memory ring (its early stages
// already issued), and the histogram it overwrote is cleared after it.
// kBand: the pass streams at band.lo and keeps the band apart (BandApart;
// band.hi == t), the admitted set is still x >= t.
template <int kB, int kU, bool kBand = false, typename Row>
__device__ __forceinline__ void AdmitMain(SharedState<kB>& s, const Row& row, uint32_t L, float t,
                                          const Frontier& fa, bool prefetch,
                                          const AdmitRing<kB>* ring = nullptr,
                                          const BandApart band = BandApart{}) {
  if (ring != nullptr) {
    if constexpr (kBand) {
      AdmitToSegmentsBandRing<kB>(row, L, fa, s.warp_count, &s.spill, &s.neg_min_key, &s.nan, *ring,
                                  band);
    } else {
      AdmitToSegmentsRing<kB>(row, L, t, fa, s.warp_count, &s.spill, &s.neg_min_key, &s.nan, *ring);
    }
    __syncthreads();
    ClearHist(s);  // CompactSegments synchronises before counting into it
  } else if constexpr (kBand) {
    AdmitToSegmentsBand<kB, kU>(row, L, fa, s.warp_count, &s.spill, &s.neg_min_key, &s.nan,
                                prefetch, band);
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
