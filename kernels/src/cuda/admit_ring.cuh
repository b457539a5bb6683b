// The certification pass's shared-memory ring: cp.async copies that keep a
// CTA's row bytes in flight without holding registers, and the streaming loop
// (StreamAdmit's contract) that consumes them. The pass itself, which hands
// each load to the admit logic, is in certification.cuh.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "block_primitives.cuh"
#include "cta_state.cuh"
#include "frontier.cuh"

namespace topk::cuda {

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

}  // namespace topk::cuda
