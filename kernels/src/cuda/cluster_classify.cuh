// The cluster route's classification pass (docs/design.md section 3): one
// read of the rank's segment that keeps the certified set (x >= t0) and the
// band (t1 <= x < t0) apart, so a proposal whose certified set underfills is
// completed from the band without reading the row again.
#pragma once

#include <cstdint>
#include <type_traits>

#include "block_primitives.cuh"
#include "cluster_state.cuh"
#include "frontier.cuh"
#include "topk/keys.h"

namespace topk::cuda {

// Appends the lanes of group g selected by m (bit j: value j) to f through
// the shared count *count (one atomic per warp); entries past f's capacity
// are dropped and the count shows it. Every lane of the warp calls it.
template <typename G>
__device__ __forceinline__ void AppendGroup(const G& g, uint32_t idx0, unsigned m,
                                            const Frontier& f, uint32_t* count, uint32_t& min_key) {
  uint32_t total;
  const uint32_t excl =
      G::kN <= 4 ? WarpPrefix4(__popc(m), &total) : WarpPrefix8(__popc(m), &total);
  uint32_t base = 0;
  if ((threadIdx.x & 31) == 0) base = atomicAdd(count, total);
  uint32_t pos = __shfl_sync(kFullMask, base, 0) + excl;
#pragma unroll
  for (int j = 0; j < G::kN; ++j) {
    if ((m >> j) & 1u) {
      const uint32_t key = Key32(g.Value(j));
      min_key = min(min_key, key);
      f.Put(pos++, idx0 + j, key);
    }
  }
}

// The rank's segment seg (len values at row index beg): x >= t0 to cert,
// t1 <= x < t0 to band (t1 == t0: no band), NaN flagged. Counts, the
// smallest admitted key and the NaN flag go to c (zeroed by the caller, with
// a barrier since). The admission compare is against t1, so 16-bit rows skip
// whole loads below the band with packed compares and widen only admitted
// values; each admitted value is then split at t0 (exact: both cutoffs are
// CoarseCutoff values and widening is exact).
template <int kB, int kU, typename Row>
__device__ __noinline__ void ClassifyCertifiedAndBand(const Row seg, uint32_t len, uint32_t beg,
                                                      float t0, float t1, const Frontier cert,
                                                      const Frontier band, ClusterCounts* c) {
  unsigned nan = 0;
  uint32_t min_key = 0xFFFFFFFFu;
  StreamAdmit<kB, kU>(seg, len, t1, [&](const auto& g, uint32_t idx0, unsigned m, unsigned nm) {
    nan |= nm;
    if (!__any_sync(kFullMask, m != 0u)) return;
    using G = std::decay_t<decltype(g)>;
    unsigned mc = 0u;
#pragma unroll
    for (int j = 0; j < G::kN; ++j) {
      if (((m >> j) & 1u) && g.Value(j) >= t0) mc |= 1u << j;
    }
    const unsigned mb = m & ~mc;
    if (__any_sync(kFullMask, mc != 0u))
      AppendGroup(g, beg + idx0, mc, cert, &c->certified, min_key);
    if (__any_sync(kFullMask, mb != 0u)) AppendGroup(g, beg + idx0, mb, band, &c->band, min_key);
  });
  PublishMinKey(min_key, &c->neg_min_key);
  if (nan) c->nan = 1u;
}

}  // namespace topk::cuda
