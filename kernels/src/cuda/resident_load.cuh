// The resident route's load (decode_route.cu, step 1): the one read of the
// row. Each rank streams its segment from global memory with 16-byte loads,
// keeps every value as its descending key in shared memory, and counts the
// exact coarse histogram of the segment in the same pass, so the boundary bin
// is known once the ranks' histograms are summed: no sample, no cutoff to
// certify, no second read.
#pragma once

#include <cstdint>

#include "block_primitives.cuh"
#include "frontier.cuh"
#include "resident_state.cuh"
#include "topk/keys.h"

namespace topk::cuda {

// 16-byte loads in flight per CTA: a 16K-value FP32 segment (a 16-rank row
// of 256K) in one round trip, and a 32K-key slice in two, with either CTA
// size: 8 a thread of 512, 4 a thread of 1024 (8 there spills under its 64
// registers and measured slower). The tail past the full steps is issued in
// one batch too (StreamSegment).
inline constexpr int kResidentLoadsInFlight = 4096;

// Loads seg[0, len) into keys[0, len) (Key32 of each value), counts Coarse of
// each non-NaN value into hist (zeroed by the caller, with a barrier since)
// and publishes the segment's NaN flag in c. Every thread of the CTA calls
// it; the caller's barrier publishes the results. Plain shared atomics: a
// warp's values spread over many bins, and the aggregation's three warp
// votes per value cost more than the rare same-bin conflicts they save.
template <int kB, typename Row>
__device__ __noinline__ void LoadResidentSegment(const Row seg, uint32_t len, uint32_t* keys,
                                                 uint32_t* hist, ResidentCounts* c) {
  constexpr int kUnroll = kResidentLoadsInFlight / kB;
  unsigned nan = 0;
  StreamSegment<kB, kUnroll>(seg, len, [&](float4 v, uint32_t idx0, unsigned valid) {
    uint32_t k4[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float x = Lane(v, j);
      const bool in = (valid >> j) & 1u;
      const bool is_nan = in && IsNan(x);
      const bool ok = in && !is_nan;
      k4[j] = Key32(x);
      nan |= is_nan ? 1u : 0u;
      if (ok) atomicAdd(&hist[CoarseOfNumber(x)], 1u);
    }
    // The body's four keys in one 16-byte store (keys is offset so that the
    // body's groups start on 16 bytes): a quarter of the scalar stores'
    // shared-memory wavefronts (four lanes of a warp share a bank per store).
    if (valid == 0xFu && (reinterpret_cast<uintptr_t>(keys + idx0) & 15u) == 0u) {
      *reinterpret_cast<uint4*>(keys + idx0) = make_uint4(k4[0], k4[1], k4[2], k4[3]);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if ((valid >> j) & 1u) keys[idx0 + j] = k4[j];
      }
    }
  });
  if (nan) c->nan = 1u;
}

}  // namespace topk::cuda
