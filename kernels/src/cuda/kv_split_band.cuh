// The KV-split route's segment pass with the band kept apart (kv_split_band):
// one pass over a segment appends x >= t0 to the row's certified buffer and
// t1 <= x < t0 to its band buffer, so a row whose certified set underfills K
// is finished from certified + band without another read of the row (the
// cluster route's classification, for CTAs that share only global memory).
#pragma once

#include <cstdint>

#include "frontier.cuh"

namespace topk::cuda {

// One class of the pass: its store, shared count and smallest-key word.
struct SegmentClass {
  Frontier f;
  uint32_t* count;
  uint32_t* neg_min_key;
};

// Streams a segment (row view from the segment start, idx_base its offset in
// the row) and appends each value to the certified or the band class; NaN
// sets *nan_flag. kB threads, every thread calls it.
template <int kB, typename Row>
__device__ __noinline__ void AdmitCertifiedAndBand(const Row seg, uint32_t len, float t0, float t1,
                                                   const SegmentClass certified,
                                                   const SegmentClass band, uint32_t* nan_flag,
                                                   uint32_t idx_base) {
  unsigned nan = 0;
  uint32_t min_certified = 0xFFFFFFFFu, min_band = 0xFFFFFFFFu;
  StreamRowAtLeast<kB, 4>(seg, len, t1, [&](float4 v, uint32_t idx0, unsigned valid) {
    const unsigned above_t1 = AtLeastMask(v, t1) & valid;
    const unsigned m0 = AtLeastMask(v, t0) & valid;
    const unsigned m1 = above_t1 & ~m0;
    nan |= NanMask(v) & valid;
    if (__any_sync(kFullMask, m0 != 0u)) {
      AppendQuad(v, idx_base + idx0, m0, certified.f, certified.count, min_certified);
    }
    if (__any_sync(kFullMask, m1 != 0u)) {
      AppendQuad(v, idx_base + idx0, m1, band.f, band.count, min_band);
    }
  });
  PublishMinKey(min_certified, certified.neg_min_key);
  PublishMinKey(min_band, band.neg_min_key);
  if (nan) *nan_flag = 1u;
}

// Appends the band entries [0, n) after the certified ones (from `at`) in
// the certified store; the caller checked at + n <= its capacity.
// Synchronises on exit.
template <int kB>
__device__ __forceinline__ void AppendBandEntries(const Frontier band, uint32_t n,
                                                  const Frontier certified, uint32_t at) {
  for (uint32_t i = threadIdx.x; i < n; i += kB) {
    uint32_t idx, key;
    band.Get(i, idx, key);
    certified.Put(at + i, idx, key);
  }
  __threadfence();  // the finisher reads its stores back through L2 (Frontier::Get)
  __syncthreads();
}

}  // namespace topk::cuda
