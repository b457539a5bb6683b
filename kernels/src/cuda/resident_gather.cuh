// The resident route's gather (decode_route.cu, step 3): every rank reads its
// keys back from shared memory and pushes the admitted ones (key <= the
// cutoff's key, i.e. x >= cut: every value in or above the boundary bin)
// into rank 0's frontier through distributed shared memory, counting their
// level-0 digits into rank 0's histogram, so rank 0 starts refinement with
// the whole admitted set and its histogram on chip. One remote atomic per
// rank reserves its slots (a count pass first): a remote atomic's round trip
// per warp and step would be the phase's latency.
#pragma once

#include <cstdint>

#include "block_primitives.cuh"
#include "frontier.cuh"
#include "resident_state.cuh"

namespace topk::cuda {

// keys[0, len) of the rank whose segment starts at row index beg: entries
// with key <= key_cut go to dst at slots reserved on *dst_count (rank 0's),
// their digit (key >> shift0, 11 bits) to dst_hist (rank 0's). The caller
// made sure every admitted entry of the row fits dst. scratch: kB / 32 + 1
// words of the CTA's shared memory. Every thread of the CTA calls it.
template <int kB>
__device__ __noinline__ void GatherToLeader(const uint32_t* keys, uint32_t len, uint32_t beg,
                                            uint32_t key_cut, const Frontier dst,
                                            uint32_t* dst_count, int shift0, uint32_t* dst_hist,
                                            uint32_t* scratch) {
  constexpr int kWarps = kB / 32;
  const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  uint32_t n = 0;
  for (uint32_t i = tid; i < len; i += kB) n += keys[i] <= key_cut ? 1u : 0u;
  uint32_t incl = n;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t y = __shfl_up_sync(kFullMask, incl, o);
    if (lane >= o) incl += y;
  }
  if (lane == 31) scratch[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    const uint32_t w = lane < kWarps ? scratch[lane] : 0u;
    uint32_t wi = w;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const uint32_t y = __shfl_up_sync(kFullMask, wi, o);
      if (lane >= o) wi += y;
    }
    uint32_t base = 0;
    if (lane == kWarps - 1) base = atomicAdd(dst_count, wi);  // the CTA's total
    base = __shfl_sync(kFullMask, base, kWarps - 1);
    if (lane < kWarps) scratch[lane] = base + wi - w;  // each warp's first slot
  }
  __syncthreads();
  uint32_t pos = scratch[warp] + incl - n;
  for (uint32_t base = 0; base < len; base += kB) {
    const uint32_t i = base + tid;
    const uint32_t key = i < len ? keys[i] : 0xFFFFFFFFu;
    const bool admit = i < len && key <= key_cut;
    if (!__any_sync(kFullMask, admit)) continue;
    if (admit) dst.Put(pos++, beg + i, key);
    AggregatedCount(admit, (key >> shift0) & 0x7FFu, dst_hist);
  }
}

}  // namespace topk::cuda
