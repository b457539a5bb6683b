// The timing side of topk-bench-gpu (bench_timing.h).
#include <algorithm>
#include <cstdint>
#include <utility>

#include "bench_timing.h"
#include "topk/cuda/resources.h"

namespace topk::bench {
namespace {

// Hashed non-zero floats: the bandwidth is never measured on zeros.
__global__ void FillHashed(float* p, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t x = static_cast<uint32_t>(i) * 0x9E3779B9u;
    x ^= x >> 15;
    p[i] = 1.0f + (x & 0xFFFFu) * (1.0f / 65536.0f);
  }
}

// 16-byte ld.global.cg over the buffer.
__global__ void ReadKernel(const float4* p, int64_t n4, float* sink) {
  float acc = 0.f;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n4;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float4 v = __ldcg(p + i);
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 1234.5f) sink[0] = acc;
}

}  // namespace

Timing Summarize(std::vector<float> ms) {
  Timing t;
  if (ms.empty()) return t;
  std::sort(ms.begin(), ms.end());
  t.median = ms[ms.size() / 2];
  // Nearest rank: ceil(0.99 n) - 1.
  const size_t rank = (ms.size() * 99 + 99) / 100;
  t.p99 = ms[std::min(ms.size(), std::max<size_t>(rank, 1)) - 1];
  return t;
}

double MeasureReadBandwidth(cudaStream_t stream, cudaEvent_t ev0, cudaEvent_t ev1) {
  const int64_t n = int64_t{1} << 30;
  auto buf = cuda::AllocateDevice<float>(n);
  auto sink = cuda::AllocateDevice<float>(1);
  if (!buf.ok() || !sink.ok()) {
    std::fprintf(stderr, "bandwidth buffer: out of device memory\n");
    std::exit(1);
  }
  FillHashed<<<4096, 256, 0, stream>>>(buf->get(), n);
  CHECK_CUDA(cudaGetLastError());
  const Timing t = TimeRepeated(stream, ev0, ev1, 1, 7, [&](int) {
    ReadKernel<<<132 * 16, 512, 0, stream>>>(reinterpret_cast<const float4*>(buf->get()), n / 4,
                                             sink->get());
    CHECK_CUDA(cudaGetLastError());
  });
  return n * 4.0 / (t.median * 1e-3);
}

}  // namespace topk::bench
