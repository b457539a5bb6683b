// The benchmark's rows on the GPU (bench_data.h).
#include "bench_data.h"
#include "topk/keys.h"

namespace topk::bench {
namespace {

__device__ __forceinline__ uint32_t Hash(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}
__device__ __forceinline__ float U01(uint64_t x) {
  return (Hash(x) >> 8) * (1.0f / 16777216.0f) + 1e-7f;
}

// Indexer-like scores, sum_j w_j relu(q_j . k_i) with h = 4 heads: q_j . k_i is
// drawn as N(mu, 1) where mu carries an attention sink (first positions),
// recency (last positions) and topical segments (5% of 256-token blocks).
// Padding beyond L is -inf (the dense baselines' mask).
__global__ void GenerateIndexerKernel(float* out, int64_t rows, int64_t width, uint64_t seed,
                                      int per_request) {
  const int64_t total = rows * width;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = t / width, i = t % width;
    const int64_t L = RowLength(r, rows, width, per_request);
    if (i >= L) {
      out[t] = -INFINITY;
      continue;
    }
    const uint64_t base = (seed * 0x9E3779B97F4A7C15ull) ^ (static_cast<uint64_t>(r) << 32);
    float mu = 0.f;
    if (i < 4) mu += 3.0f;
    const float age = static_cast<float>(L - i);
    mu += 1.5f * __expf(-age / 64.f);
    if (U01(base ^ (0xABCDull + (i >> 8) * 7919ull)) < 0.05f) mu += 1.0f;
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float u1 = U01(base + i * 8 + j * 2), u2 = U01(base + i * 8 + j * 2 + 1);
      const float z = sqrtf(-2.f * __logf(u1)) * __cosf(6.2831853f * u2);
      const float w = 0.25f + 0.5f * U01(base ^ (0x5151ull + j));
      s += w * fmaxf(mu + z, 0.f);
    }
    out[t] = s;
  }
}

// The FP32 scores rounded to the 16-bit type, nearest even (-inf stays -inf).
__global__ void NarrowScoresKernel(const float* in, uint16_t* out, int64_t n, int fp16) {
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < n;
       t += int64_t{gridDim.x} * blockDim.x) {
    out[t] = fp16 ? topk::HalfBitsRoundNearest(in[t]) : topk::Bf16BitsRoundNearest(in[t]);
  }
}

// Scan-only control: the persistent selector's row schedule (row per CTA,
// grid-stride over rows) with only the 16-byte row read (elements of
// elem_bytes; pitch in elements, a multiple of 16 bytes).
__global__ void __launch_bounds__(512)
    ScanRowsKernel(const uint8_t* scores, int64_t pitch, int elem_bytes, int64_t rows, float* sink,
                   int per_request) {
  uint32_t acc = 0;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const uint4* row = reinterpret_cast<const uint4*>(scores + r * pitch * elem_bytes);
    const int64_t n16 = RowLength(r, rows, pitch, per_request) * elem_bytes / 16;
    for (int64_t i = threadIdx.x; i < n16; i += 512 * 4) {
      uint4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        v[u] = i + u * 512 < n16 ? __ldcg(row + i + u * 512) : make_uint4(0u, 0u, 0u, 0u);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
  }
  if (acc == 0x12345u) sink[0] = 1.f;
}

__global__ void FillLengthsKernel(int32_t* l, int64_t rows, int64_t width, int per_request) {
  const int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (r < rows) l[r] = static_cast<int32_t>(RowLength(r, rows, width, per_request));
}

}  // namespace

void GenerateIndexer(float* out, int64_t rows, int64_t width, uint64_t seed, cudaStream_t stream,
                     int per_request) {
  GenerateIndexerKernel<<<8192, 256, 0, stream>>>(out, rows, width, seed, per_request);
}

void NarrowScores(const float* in, uint16_t* out, int64_t n, bool fp16, cudaStream_t stream) {
  NarrowScoresKernel<<<8192, 256, 0, stream>>>(in, out, n, fp16 ? 1 : 0);
}

void FillLengths(int32_t* lengths, int64_t rows, int64_t width, cudaStream_t stream,
                 int per_request) {
  FillLengthsKernel<<<static_cast<unsigned>((rows + 255) / 256), 256, 0, stream>>>(
      lengths, rows, width, per_request);
}

void ScanRows(const uint8_t* scores, int64_t pitch, int elem_bytes, int64_t rows, float* sink,
              int grid, cudaStream_t stream, int per_request) {
  ScanRowsKernel<<<grid, 512, 0, stream>>>(scores, pitch, elem_bytes, rows, sink, per_request);
}

}  // namespace topk::bench
