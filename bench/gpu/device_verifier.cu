// The benchmark's on-device exactness check: every timed output is verified
// on the GPU (all rows), outside the timed region.
#include "block_primitives.cuh"
#include "device_verifier.h"
#include "topk/keys.h"

namespace topk::cuda {
namespace {

// Verification of a selection on the device: per row, indices distinct and in
// range (block sort), and the count of valid values strictly greater than the
// minimum selected value equal to the count of selected values above it.
// Row: the view of score_row.cuh (values compared as their FP32 widenings).
template <typename Row>
__global__ void __launch_bounds__(kThreads)
    VerifyKernel(const DeviceArgs a, int32_t k, int32_t dtype, unsigned long long* bad_rows,
                 int* first_bad) {
  extern __shared__ uint4 smem_raw[];
  uint64_t* keys = reinterpret_cast<uint64_t*>(smem_raw);
  __shared__ unsigned bad;
  __shared__ unsigned gt_sel, gt_row;
  const int64_t r = blockIdx.x;
  const Row row =
      RowFactory<Row>::Make(a.scores, a.layout == 0 ? r * a.pitch : a.row_offsets[r], dtype);
  const int64_t L = a.lengths[r];
  const int32_t* out = a.indices + r * static_cast<int64_t>(k);
  const uint32_t want = static_cast<uint32_t>(L < k ? L : k);
  uint32_t n = 1;
  while (n < static_cast<uint32_t>(k)) n <<= 1;
  if (threadIdx.x == 0) bad = 0, gt_sel = 0, gt_row = 0;
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < n; i += kThreads) {
    uint64_t v = ~0ull;
    if (i < static_cast<uint32_t>(k)) {
      const int32_t idx = out[i];
      if (i < want) {
        if (idx < 0 || idx >= L) {
          bad = 1;
        } else {
          v = static_cast<uint32_t>(idx);
        }
      } else if (idx != -1) {
        bad = 1;
      }
    }
    keys[i] = v;
  }
  __syncthreads();
  BlockBitonicSort<kThreads>(keys, n);
  for (uint32_t i = threadIdx.x + 1; i < want; i += kThreads) {
    if (keys[i] == keys[i - 1]) bad = 1;
  }
  // Minimum selected key (descending key: the maximum key32).
  __shared__ unsigned max_key;
  if (threadIdx.x == 0) max_key = 0;
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < want; i += kThreads) {
    if (keys[i] != ~0ull) atomicMax(&max_key, Key32(row.At(static_cast<uint32_t>(keys[i]))));
  }
  __syncthreads();
  const unsigned kmin = max_key;
  unsigned c_sel = 0, c_row = 0;
  for (uint32_t i = threadIdx.x; i < want; i += kThreads) {
    if (keys[i] != ~0ull && Key32(row.At(static_cast<uint32_t>(keys[i]))) < kmin) ++c_sel;
  }
  if (want == static_cast<uint32_t>(k) && L > k) {
    for (int64_t i = threadIdx.x; i < L; i += kThreads)
      c_row += Key32(row.At(static_cast<uint32_t>(i))) < kmin ? 1u : 0u;
  }
  atomicAdd(&gt_sel, c_sel);
  atomicAdd(&gt_row, c_row);
  __syncthreads();
  if (threadIdx.x == 0) {
    if (L > k && gt_row != gt_sel) bad = 1;
    if (bad) {
      atomicAdd(bad_rows, 1ull);
      atomicMin(first_bad, static_cast<int>(r));
    }
  }
}

}  // namespace

cudaError_t LaunchVerify(const DeviceArgs& args, int32_t k, ScoreType dtype, int64_t num_rows,
                         unsigned long long* bad_rows, int* first_bad, cudaStream_t stream) {
  if (num_rows == 0) return cudaSuccess;
  uint32_t n = 1;
  while (n < static_cast<uint32_t>(k)) n <<= 1;
  if (n > 8192) return cudaErrorInvalidValue;
  // Up to 8192 keys of 8 bytes: above the default 48 KiB of dynamic shared
  // memory, so the limit is raised before the launch.
  const bool wide = dtype == ScoreType::kFloat32;
  const cudaError_t e =
      cudaFuncSetAttribute(wide ? VerifyKernel<F32Row> : VerifyKernel<Half16Row>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(8 * 8192));
  if (e != cudaSuccess) return e;
  const int32_t type = static_cast<int32_t>(dtype);
  if (wide) {
    VerifyKernel<F32Row><<<static_cast<unsigned>(num_rows), kThreads, 8 * n, stream>>>(
        args, k, type, bad_rows, first_bad);
  } else {
    VerifyKernel<Half16Row><<<static_cast<unsigned>(num_rows), kThreads, 8 * n, stream>>>(
        args, k, type, bad_rows, first_bad);
  }
  return cudaGetLastError();
}

}  // namespace topk::cuda
