// The candidate store every phase after the proposal appends to and reads
// from, and the warp-level primitives that append to it: lane masks of a
// float4, aggregated histogram counts, warp prefix sums and slot reservation;
// and the admission streamer (StreamAdmit) that hands them groups of values
// with their masks.
#pragma once

#include <cstdint>

#include "block_primitives.cuh"
#include "topk/keys.h"

namespace topk::cuda {

// A frontier store: a shared-memory part, then the CTA's global overflow
// slice. Entries past the capacity are dropped; the caller sees the count
// exceed capacity() and refines that level by re-scanning the row instead.
struct Frontier {
  uint32_t* s_idx;
  uint32_t* s_key;
  uint32_t s_cap;
  uint32_t* g_idx;
  uint32_t* g_key;
  uint32_t g_cap;

  __device__ __forceinline__ uint32_t capacity() const { return s_cap + g_cap; }
  __device__ __forceinline__ void Put(uint32_t pos, uint32_t idx, uint32_t key) const {
    if (pos < s_cap) {
      s_idx[pos] = idx;
      s_key[pos] = key;
    } else if (pos - s_cap < g_cap) {
      g_idx[pos - s_cap] = idx;
      g_key[pos - s_cap] = key;
    }
  }
  __device__ __forceinline__ void Get(uint32_t pos, uint32_t& idx, uint32_t& key) const {
    if (pos < s_cap) {
      idx = s_idx[pos];
      key = s_key[pos];
    } else {
      // L1-bypassing: KV-split finishers read entries other CTAs wrote.
      idx = __ldcg(g_idx + (pos - s_cap));
      key = __ldcg(g_key + (pos - s_cap));
    }
  }
};

__device__ __forceinline__ unsigned NanMask(float4 v) {
  return (v.x != v.x ? 1u : 0u) | (v.y != v.y ? 2u : 0u) | (v.z != v.z ? 4u : 0u) |
         (v.w != v.w ? 8u : 0u);
}

__device__ __forceinline__ unsigned AtLeastMask(float4 v, float t) {
  return (v.x >= t ? 1u : 0u) | (v.y >= t ? 2u : 0u) | (v.z >= t ? 4u : 0u) | (v.w >= t ? 8u : 0u);
}

__device__ __forceinline__ float Lane(float4 v, int j) {
  return j == 0 ? v.x : (j == 1 ? v.y : (j == 2 ? v.z : v.w));
}

// Adds one to hist[bin] for every lane with ok. A warp whose counted lanes
// share one bin (candidates crowd into one or two digit-0 bins; constant or
// one-bin rows) adds once, found with two redux instructions; other warps add
// per lane (match.any aggregation of every sample made the proposal slower,
// bench/NOTES.md). Every lane of the warp must call it.
__device__ __forceinline__ void AggregatedCount(bool ok, uint32_t bin, uint32_t* hist) {
  const unsigned act = __ballot_sync(kFullMask, ok);
  if (act == 0u) return;
  const uint32_t lo = __reduce_min_sync(kFullMask, ok ? bin : 0xFFFFFFFFu);
  const uint32_t hi = __reduce_max_sync(kFullMask, ok ? bin : 0u);
  if (lo == hi) {
    if ((threadIdx.x & 31) == static_cast<uint32_t>(__ffs(act) - 1)) {
      atomicAdd(&hist[lo], static_cast<uint32_t>(__popc(act)));
    }
  } else if (ok) {
    atomicAdd(&hist[bin], 1u);
  }
}

// AggregatedCount for the four values of a lane at once (bit j of m: digit[j]
// is counted; hist_s: the histogram's SharedAddress): one redux pair a quad,
// not a ballot and a pair a value. Every lane of the warp must call it.
__device__ __forceinline__ void AggregatedCountQuad(unsigned m, const uint32_t (&digit)[4],
                                                    uint32_t hist_s) {
  uint32_t lo = 0xFFFFFFFFu, hi = 0u;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if ((m >> j) & 1u) lo = min(lo, digit[j]), hi = max(hi, digit[j]);
  }
  const uint32_t warp_lo = __reduce_min_sync(kFullMask, lo);
  const uint32_t warp_hi = __reduce_max_sync(kFullMask, hi);
  if (warp_lo > warp_hi) return;  // no lane counts anything
  if (warp_lo == warp_hi) {
    const uint32_t n = __reduce_add_sync(kFullMask, static_cast<uint32_t>(__popc(m)));
    SharedAddIf((threadIdx.x & 31) == 0, hist_s + 4u * warp_lo, n);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) SharedAddIf((m >> j) & 1u, hist_s + 4u * digit[j], 1u);
  }
}

// Warp prefix of the per-lane counts cnt (0..4): three bit-planes by ballot.
// Returns the lane's exclusive offset; *total gets the warp's sum.
__device__ __forceinline__ uint32_t WarpPrefix4(uint32_t cnt, uint32_t* total) {
  const int lane = threadIdx.x & 31;
  const unsigned p0 = __ballot_sync(kFullMask, cnt & 1u);
  const unsigned p1 = __ballot_sync(kFullMask, cnt & 2u);
  const unsigned p2 = __ballot_sync(kFullMask, cnt & 4u);
  const unsigned lt = (1u << lane) - 1u;
  *total = __popc(p0) + 2u * __popc(p1) + 4u * __popc(p2);
  return __popc(p0 & lt) + 2u * __popc(p1 & lt) + 4u * __popc(p2 & lt);
}

// Warp-aggregated append of the admitted lanes of v (bit j of m: v[j]
// admitted) to a shared-count frontier: one atomic per warp reserves the
// slots. Used by the band pass and the KV-split segments (cold or
// cross-CTA); the main pass uses AppendQuadToSegment.
__device__ __forceinline__ void AppendQuad(float4 v, uint32_t idx0, unsigned m, const Frontier& f,
                                           uint32_t* count, uint32_t& min_key) {
  uint32_t total;
  const uint32_t excl = WarpPrefix4(__popc(m), &total);
  uint32_t base = 0;
  if ((threadIdx.x & 31) == 0) base = atomicAdd(count, total);
  uint32_t pos = __shfl_sync(kFullMask, base, 0) + excl;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if ((m >> j) & 1u) {
      const uint32_t key = Key32(Lane(v, j));
      min_key = min(min_key, key);
      f.Put(pos++, idx0 + j, key);
    }
  }
}

// Publishes the smallest admitted key of the warp (the largest value) as
// atomicMax of its complement, so a zeroed word means "none yet". Every lane
// of the warp must call it.
__device__ __forceinline__ void PublishMinKey(uint32_t min_key, uint32_t* neg_min_key) {
  const uint32_t w = __reduce_min_sync(kFullMask, min_key);
  if ((threadIdx.x & 31) == 0 && w != 0xFFFFFFFFu) atomicMax(neg_min_key, ~w);
}

// Warp prefix of per-lane counts 0..8: four bit-planes by ballot (the
// 16-bit main pass appends up to 8 values a lane).
__device__ __forceinline__ uint32_t WarpPrefix8(uint32_t cnt, uint32_t* total) {
  const int lane = threadIdx.x & 31;
  const unsigned p0 = __ballot_sync(kFullMask, cnt & 1u);
  const unsigned p1 = __ballot_sync(kFullMask, cnt & 2u);
  const unsigned p2 = __ballot_sync(kFullMask, cnt & 4u);
  const unsigned p3 = __ballot_sync(kFullMask, cnt & 8u);
  const unsigned lt = (1u << lane) - 1u;
  *total = __popc(p0) + 2u * __popc(p1) + 4u * __popc(p2) + 8u * __popc(p3);
  return __popc(p0 & lt) + 2u * __popc(p1 & lt) + 4u * __popc(p2 & lt) + 8u * __popc(p3 & lt);
}

// The main pass's append: each warp owns a private segment of the shared
// store (seg entries at warp * seg) and a warp-uniform register cursor n, so
// the hot loop has no atomic and no return latency. A batch that does not fit
// the segment goes to the CTA's global slice (one atomic on *spill; entries
// past the slice are dropped and the count shows it). G: a group of
// consecutive values (Quad, or Octet of a 16-bit load), bit j of m: value j
// admitted.
template <typename G>
__device__ __forceinline__ void AppendGroupToSegment(const G& g, uint32_t idx0, unsigned m,
                                                     const Frontier& f, uint32_t seg, uint32_t& n,
                                                     uint32_t* spill, uint32_t& min_key) {
  uint32_t total;
  const uint32_t excl =
      G::kN <= 4 ? WarpPrefix4(__popc(m), &total) : WarpPrefix8(__popc(m), &total);
  const uint32_t warp = threadIdx.x >> 5;
  if (n + total <= seg) {
    uint32_t pos = warp * seg + n + excl;
#pragma unroll
    for (int j = 0; j < G::kN; ++j) {
      if ((m >> j) & 1u) {
        const uint32_t key = Key32(g.Value(j));
        min_key = min(min_key, key);
        f.s_idx[pos] = idx0 + j;
        f.s_key[pos] = key;
        ++pos;
      }
    }
    n += total;
    return;
  }
  uint32_t base = 0;
  if ((threadIdx.x & 31) == 0) base = atomicAdd(spill, total);
  uint32_t pos = __shfl_sync(kFullMask, base, 0) + excl;
#pragma unroll
  for (int j = 0; j < G::kN; ++j) {
    if ((m >> j) & 1u) {
      const uint32_t key = Key32(g.Value(j));
      min_key = min(min_key, key);
      if (pos < f.g_cap) {
        f.g_idx[pos] = idx0 + j;
        f.g_key[pos] = key;
      }
      ++pos;
    }
  }
}

// The groups of values StreamAdmit hands its callback: 4 FP32 values (a
// 16-byte load of an FP32 row, or one scalar of the head or tail in .x), or
// the 8 values of a 16-bit load, widened on demand. Value(j): value j as FP32.
struct Quad {
  static constexpr int kN = 4;
  float4 v;
  __device__ __forceinline__ float Value(int j) const { return Lane(v, j); }
};
template <typename Unpack>
struct Octet {
  static constexpr int kN = 8;
  uint4 w;
  __device__ __forceinline__ float Value(int j) const {
    const uint32_t word = j < 2 ? w.x : (j < 4 ? w.y : (j < 6 ? w.z : w.w));
    const float2 pair = Unpack::Pair(word);
    return (j & 1) ? pair.y : pair.x;
  }
};

// Bit j of *ge: value j of the 16-bit load is >= the threshold pair t2 (the
// type's compare, two values an instruction); of *nan: value j is NaN.
template <typename Unpack>
__device__ __forceinline__ void PackedMasks(uint4 v, uint32_t t2, unsigned* ge, unsigned* nan) {
  const auto t = Unpack::Bits(t2);
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
  unsigned g = 0u, n = 0u;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const auto h = Unpack::Bits(words[k]);
    const unsigned gk = __hge2_mask(h, t), nk = __hneu2_mask(h, h);
    g |= ((gk & 1u) | ((gk >> 15) & 2u)) << (2 * k);
    n |= ((nk & 1u) | ((nk >> 15) & 2u)) << (2 * k);
  }
  *ge = g;
  *nan = n;
}

template <int kB, int kUnroll, typename Unpack, typename Row, typename G>
__device__ __forceinline__ void StreamAdmitAs(const Row& row, uint32_t L, float lo, G& g,
                                              bool prefetch) {
  constexpr uint32_t kV = Row::kPerLoad;
  const uint32_t tid = threadIdx.x;
  const uint32_t t2 = Unpack::ExactThreshold(lo);
  const uint32_t head = HeadElements(row, L);
  const uint32_t nv = (L - head) / kV;
  const uint4* body = reinterpret_cast<const uint4*>(row.p + head);
  constexpr uint32_t kStep = kB * kUnroll;
  const uint32_t full_end = nv / kStep * kStep;
  for (uint32_t base = 0; base < full_end; base += kStep) {
    if (prefetch && threadIdx.x == 0 && base + (kPrefetchChunks + 1) * kStep <= full_end) {
      PrefetchL2(body + base + kPrefetchChunks * kStep, kStep * 16u);
    }
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldcg(body + base + u * kB + tid);
    // Which loads hold an admitted value or a NaN (one unordered compare a
    // pair); their masks are built only when the warp needs them.
    unsigned hit = 0u;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) hit |= Unpack::AnyAtLeastOrNan(v[u], t2) ? 1u << u : 0u;
    hit = __reduce_or_sync(kFullMask, hit);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if ((hit >> u) & 1u) {
        unsigned ge, nan;
        PackedMasks<Unpack>(v[u], t2, &ge, &nan);
        g(Octet<Unpack>{v[u]}, head + kV * (base + u * kB + tid), ge, nan);
      }
    }
  }
  for (uint32_t base = full_end; base < nv; base += kB) {
    const uint32_t i = base + tid;
    const bool ok = i < nv;
    const uint4 v = ok ? __ldcg(body + i) : make_uint4(0u, 0u, 0u, 0u);
    unsigned ge = 0u, nan = 0u;
    if (ok) PackedMasks<Unpack>(v, t2, &ge, &nan);
    if (__any_sync(kFullMask, (ge | nan) != 0u)) g(Octet<Unpack>{v}, head + kV * i, ge, nan);
  }
  const uint32_t tail0 = head + kV * nv;
  const uint32_t ntail = L - tail0;
  if (tid < 32) {
    const uint32_t i = tid < head ? tid : tail0 + (tid - head);
    const bool ok = tid < head + ntail;
    const float x = ok ? row.At(i) : 0.f;
    g(Quad{make_float4(x, 0.f, 0.f, 0.f)}, i, ok && x >= lo ? 1u : 0u, ok && IsNan(x) ? 1u : 0u);
  }
}

// Streams the row for an admission pass: g(const Group& group, uint32_t
// index_of_value_0, unsigned admitted, unsigned nan) with bit j of admitted
// set iff value j is valid and >= lo, of nan iff valid and NaN; called
// warp-uniformly. FP32 rows: a Quad per 16-byte load (StreamRow). 16-bit
// rows: an Octet per 16-byte load with both masks from 8 packed compares (no
// value is widened unless admitted), and a load whose whole warp has neither
// is skipped; the scalar head and tail come as Quads.
template <int kB, int kUnroll, typename G>
__device__ __forceinline__ void StreamAdmit(const F32Row& row, uint32_t L, float lo, G&& g,
                                            bool prefetch = false) {
  StreamRow<kB, kUnroll>(
      row, L,
      [&](float4 v, uint32_t idx0, unsigned valid) {
        g(Quad{v}, idx0, AtLeastMask(v, lo) & valid, NanMask(v) & valid);
      },
      prefetch);
}
template <int kB, int kUnroll, typename G>
__device__ __forceinline__ void StreamAdmit(const Half16Row& row, uint32_t L, float lo, G&& g,
                                            bool prefetch = false) {
  if (row.fp16) {
    StreamAdmitAs<kB, kUnroll, UnpackFp16>(row, L, lo, g, prefetch);
  } else {
    StreamAdmitAs<kB, kUnroll, UnpackBf16>(row, L, lo, g, prefetch);
  }
}

}  // namespace topk::cuda
