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
      AppendGroupShared(g, beg + idx0, mc, cert, &c->certified, min_key);
    if (__any_sync(kFullMask, mb != 0u))
      AppendGroupShared(g, beg + idx0, mb, band, &c->band, min_key);
  });
  PublishMinKey(min_key, &c->neg_min_key);
  if (nan) c->nan = 1u;
}

}  // namespace topk::cuda
