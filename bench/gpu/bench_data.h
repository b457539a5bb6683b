// The benchmark's rows, generated on the GPU: causal lengths, indexer-like
// scores (FP32, or rounded to a 16-bit type), and the scan-only control that
// reads them with the persistent selector's row schedule.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace topk::bench {

// Row r's length in an M x N benchmark matrix: causal (N - M + 1 + r) for
// M <= N / 2; taller matrices cycle through the last N / 2 causal lengths, so
// every row stays in (N / 2, N].
__host__ __device__ inline int64_t CausalLength(int64_t r, int64_t rows, int64_t width) {
  const int64_t span = rows < width / 2 ? rows : (width / 2 > 0 ? width / 2 : 1);
  return width - (rows - 1 - r) % span;
}

// Row r's length when the rows come in requests of per_request consecutive
// rows (speculative decoding: a request's rows end at L - n + 1 .. L, with
// the requests' L causal over the requests); per_request = 1: CausalLength.
__host__ __device__ inline int64_t RowLength(int64_t r, int64_t rows, int64_t width,
                                             int per_request) {
  if (per_request <= 1) return CausalLength(r, rows, width);
  const int64_t requests = (rows + per_request - 1) / per_request;
  const int64_t last = CausalLength(r / per_request, requests, width);
  const int64_t length = last - (per_request - 1 - r % per_request);
  return length > 1 ? length : 1;
}

// rows x width indexer-like scores (pitch = width) into `out`, -inf past
// each row's length (RowLength); deterministic in `seed`.
void GenerateIndexer(float* out, int64_t rows, int64_t width, uint64_t seed, cudaStream_t stream,
                     int per_request = 1);

// The n FP32 scores rounded to FP16 (fp16) or BF16, nearest even.
void NarrowScores(const float* in, uint16_t* out, int64_t n, bool fp16, cudaStream_t stream);

// lengths[r] = RowLength(r, rows, width, per_request).
void FillLengths(int32_t* lengths, int64_t rows, int64_t width, cudaStream_t stream,
                 int per_request = 1);

// The scan-only control: `grid` CTAs of 512 threads read each row's length
// (RowLength) with 16-byte loads, rows taken blockIdx.x, + grid, ... (pitch
// in elements of elem_bytes, a multiple of 16 bytes); nothing but a sink
// written.
void ScanRows(const uint8_t* scores, int64_t pitch, int elem_bytes, int64_t rows, float* sink,
              int grid, cudaStream_t stream, int per_request = 1);

}  // namespace topk::bench
