// Output (docs/design.md section 2, end of phase 3) on one CTA: writes the
// committed indices of a row, sorted or in index order when asked, padded
// with the empty slot; and the all-empty row of a row that has no answer.
#pragma once

#include <cstdint>

#include "block_primitives.cuh"
#include "topk/keys.h"

namespace topk::cuda {

// Writes the row: count committed indices then kEmptySlot. Sorted: value
// descending, ties by index; deterministic unsorted: index ascending.
template <int kB, typename Row>
__device__ __noinline__ void FinalizeRow(const Row row, const uint32_t* out, uint32_t count,
                                         int32_t* __restrict__ out_row, uint32_t k, bool sorted,
                                         bool deterministic, uint64_t* sort_buf) {
  const uint32_t tid = threadIdx.x;
  if (sorted || deterministic) {
    uint32_t n = 1;
    while (n < count) n <<= 1;
    for (uint32_t i = tid; i < n; i += kB) {
      uint64_t v = ~0ull;
      if (i < count) {
        const uint32_t idx = out[i];
        v = sorted ? ((static_cast<uint64_t>(Key32(row.At(idx))) << 32) | idx) : idx;
      }
      sort_buf[i] = v;
    }
    __syncthreads();
    BlockBitonicSort<kB>(sort_buf, n);
    for (uint32_t i = tid; i < k; i += kB) {
      out_row[i] = i < count ? static_cast<int32_t>(static_cast<uint32_t>(sort_buf[i])) : -1;
    }
  } else {
    for (uint32_t i = tid; i < k; i += kB) {
      out_row[i] = i < count ? static_cast<int32_t>(out[i]) : -1;
    }
  }
}

// A row with no answer (bad length, NaN): every slot empty.
template <int kB>
__device__ __noinline__ void FillEmpty(int32_t* out_row, uint32_t k) {
  for (uint32_t i = threadIdx.x; i < k; i += kB) out_row[i] = -1;
}

}  // namespace topk::cuda
