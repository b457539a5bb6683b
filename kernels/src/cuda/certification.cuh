// Certification (docs/design.md section 2, phase 2) on one CTA: the fused
// full-row pass that admits every x >= tau0 as a candidate and flags NaN, the
// compaction of its warp segments with the level-0 digit histogram, and the
// appending pass that serves the tau1 band and the KV-split segments.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

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

// The certification pass's shared-memory ring: each thread copies its own
// 16-byte loads of the row body into its own slots with cp.async (no
// registers held, no barrier: a thread reads only what it copied), so a CTA
// keeps kDepth x kB x 16 bytes in flight instead of the 4 loads a thread's
// registers hold (bench/NOTES.md, "Selector II"). The slots alias buffers
// that are dead during the main pass: frontier B and the shared output (dead
// from the row's start until refinement: the kEarly slots, issued before the
// proposal so they land during it) and the coarse histogram (the proposal's:
// the kLate slots, issued when the pass starts; cleared again after it).
// Slot k of thread t: 16 bytes at region(k) + (k - first(k)) * kB + t.
template <int kB>
struct AdmitRing {
  using V = PersistentVariant<kB>;
  static constexpr int kSlotBytes = kB * 16;
  static constexpr int kInB = 8 * V::kFrontier / kSlotBytes;
  static constexpr int kInOut = 4 * V::kOutput / kSlotBytes;
  static constexpr int kEarly = kInB + kInOut;
  static constexpr int kLate = 4 * kCoarseBins / kSlotBytes;
  static constexpr int kDepth = kEarly + kLate;
  static_assert(kInB * kSlotBytes == 8 * V::kFrontier && kInOut * kSlotBytes == 4 * V::kOutput &&
                    kLate * kSlotBytes == 4 * kCoarseBins,
                "whole slots");
  uint4* b;     // frontier B: kFrontier index words, then kFrontier key words
  uint4* out;   // SharedState::out
  uint4* hist;  // SharedState::hist
  template <int k>
  __device__ __forceinline__ uint4* Slot() const {
    static_assert(k >= 0 && k < kDepth, "slot");
    if constexpr (k < kInB) return b + k * kB + threadIdx.x;
    if constexpr (k >= kInB && k < kEarly) return out + (k - kInB) * kB + threadIdx.x;
    if constexpr (k >= kEarly) return hist + (k - kEarly) * kB + threadIdx.x;
  }
  __device__ __forceinline__ uint4* SlotAt(uint32_t k) const {
    uint4* base =
        k < kInB ? b + k * kB : (k < kEarly ? out + (k - kInB) * kB : hist + (k - kEarly) * kB);
    return base + threadIdx.x;
  }
};

// The ring over the persistent route's stores (MakeCtaStores: frontier B's
// keys follow its indices).
template <int kB>
__device__ __forceinline__ AdmitRing<kB> MakeAdmitRing(SharedState<kB>& s, const Frontier& fb) {
  return AdmitRing<kB>{reinterpret_cast<uint4*>(fb.s_idx), reinterpret_cast<uint4*>(s.out),
                       reinterpret_cast<uint4*>(s.hist)};
}

__device__ __forceinline__ void CpAsync16(uint4* smem, const uint4* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(smem))),
               "l"(gmem)
               : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}
__device__ __forceinline__ void CpAsyncWaitAll() {
  asm volatile("cp.async.wait_all;" ::: "memory");
}

// f(std::integral_constant<int, k>) for k = kFirst .. kFirst + kCount - 1, so
// that k can pick a ring slot at compile time.
template <int kFirst, typename F, int... kI>
__device__ __forceinline__ void StaticForImpl(F& f, std::integer_sequence<int, kI...>) {
  (f(std::integral_constant<int, kFirst + kI>{}), ...);
}
template <int kFirst, int kCount, typename F>
__device__ __forceinline__ void StaticFor(F&& f) {
  StaticForImpl<kFirst>(f, std::make_integer_sequence<int, kCount>{});
}

// Stage j of the row body: the 16-byte loads j * kB + t (one per thread t),
// into slot j mod kDepth. One commit group per stage and thread, empty past
// the body, so that group counts stay uniform.
template <int kB, int kFirst, int kCount, typename Row>
__device__ __forceinline__ void RingIssueStages(const Row& row, uint32_t L,
                                                const AdmitRing<kB>& ring) {
  const uint32_t head = HeadElements(row, L);
  const uint32_t nv = (L - head) / Row::kPerLoad;
  const uint4* body = reinterpret_cast<const uint4*>(row.p + head);
  StaticFor<kFirst, kCount>([&](auto kc) {
    constexpr int k = decltype(kc)::value;
    const uint32_t i = k * kB + threadIdx.x;
    if (i < nv) CpAsync16(ring.template Slot<k>(), body + i);
    CpAsyncCommit();
  });
}

// The ring's first stages (frontier B and output slots), issued when a
// sampled row starts so that they land during its proposal. A row that then
// does not take the ring pass must drain them (CpAsyncWaitAll, then a
// barrier) before frontier B or the output is written.
template <int kB, typename Row>
__device__ __forceinline__ void RingIssueEarly(const Row& row, uint32_t L,
                                               const AdmitRing<kB>& ring) {
  RingIssueStages<kB, 0, AdmitRing<kB>::kEarly>(row, L, ring);
}

// One 16-byte load of the ring pass, as StreamAdmit hands it to g: FP32, a
// Quad with its masks; 16-bit, an Octet when a value of the warp's loads is
// >= lo or NaN (the packed prefilter, exact masks only then).
template <typename Unpack>
struct RingLoad {
  template <typename G>
  __device__ __forceinline__ static void Admit(uint4 v, uint32_t idx, bool ok, float lo,
                                               uint32_t t2, G& g) {
    if constexpr (std::is_same_v<Unpack, UnpackF32>) {
      const float4 x = make_float4(__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z),
                                   __uint_as_float(v.w));
      g(Quad{x}, idx, ok ? AtLeastMask(x, lo) : 0u, ok ? NanMask(x) : 0u);
    } else {
      if (__any_sync(kFullMask, ok && Unpack::AnyAtLeastOrNan(v, t2))) {
        unsigned ge = 0u, nan = 0u;
        if (ok) PackedMasks<Unpack>(v, t2, &ge, &nan);
        g(Octet<Unpack>{v}, idx, ge, nan);
      }
    }
  }
};

// StreamAdmit through the ring (same calls of g, same values): the early
// stages are in flight (RingIssueEarly); issues the late ones, then consumes
// stage j and refills its slot with stage j + kDepth. The scalar head and
// tail as StreamAdmit. Every copy is consumed before it returns.
template <int kB, typename Unpack, typename Row, typename G>
__device__ __forceinline__ void StreamAdmitRingAs(const Row& row, uint32_t L, float lo, G& g,
                                                  const AdmitRing<kB>& ring) {
  using R = AdmitRing<kB>;
  constexpr int kD = R::kDepth;
  constexpr uint32_t kV = Row::kPerLoad;
  const uint32_t tid = threadIdx.x;
  uint32_t t2 = 0u;
  if constexpr (!std::is_same_v<Unpack, UnpackF32>) t2 = Unpack::ExactThreshold(lo);
  const uint32_t head = HeadElements(row, L);
  const uint32_t nv = (L - head) / kV;
  const uint4* body = reinterpret_cast<const uint4*>(row.p + head);
  RingIssueStages<kB, R::kEarly, R::kLate>(row, L, ring);
  // One call site of g: a loop over the slots (the slot pointer computed),
  // not an unrolled ring that would copy g's large append kDepth times.
  const uint32_t stages = (nv + kB - 1) / kB;
  uint32_t k = 0;  // slot of stage j
  for (uint32_t j = 0; j < stages; ++j) {
    uint4* slot = ring.SlotAt(k);
    // Stage j's group is the (j+1)-th committed; kD - 1 more follow it.
    CpAsyncWait<kD - 1>();
    const uint4 v = *slot;
    const uint32_t i = j * kB + tid;
    RingLoad<Unpack>::Admit(v, head + kV * i, i < nv, lo, t2, g);
    // v has been used: the slot is free for stage j + kD.
    const uint32_t next = i + kD * kB;
    if (next < nv) CpAsync16(slot, body + next);
    CpAsyncCommit();
    k = k + 1 == kD ? 0u : k + 1;
  }
  CpAsyncWaitAll();
  const uint32_t tail0 = head + kV * nv;
  const uint32_t ntail = L - tail0;
  if (tid < 32) {
    const uint32_t i = tid < head ? tid : tail0 + (tid - head);
    const bool ok = tid < head + ntail;
    const float x = ok ? row.At(i) : 0.f;
    g(Quad{make_float4(x, 0.f, 0.f, 0.f)}, i, ok && x >= lo ? 1u : 0u, ok && IsNan(x) ? 1u : 0u);
  }
}

template <int kB, typename G>
__device__ __forceinline__ void StreamAdmitRing(const F32Row& row, uint32_t L, float lo, G&& g,
                                                const AdmitRing<kB>& ring) {
  StreamAdmitRingAs<kB, UnpackF32>(row, L, lo, g, ring);
}
template <int kB, typename G>
__device__ __forceinline__ void StreamAdmitRing(const Half16Row& row, uint32_t L, float lo, G&& g,
                                                const AdmitRing<kB>& ring) {
  if (row.fp16) {
    StreamAdmitRingAs<kB, UnpackFp16>(row, L, lo, g, ring);
  } else {
    StreamAdmitRingAs<kB, UnpackBf16>(row, L, lo, g, ring);
  }
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
// ring: the pass streams through the shared-memory ring (its early stages
// already issued), and the histogram it overwrote is cleared after it.
template <int kB, int kU, typename Row>
__device__ __forceinline__ void AdmitMain(SharedState<kB>& s, const Row& row, uint32_t L, float t,
                                          const Frontier& fa, bool prefetch,
                                          const AdmitRing<kB>* ring = nullptr) {
  if (ring != nullptr) {
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
