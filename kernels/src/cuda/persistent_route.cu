// The persistent route (docs/design.md section 3): one CTA (512 threads x 2
// per SM, or 256 x 4: the kB template parameter of every device helper; FP32
// or 16-bit rows: the Row view of score_row.cuh) owns
// a row through all phases (SelectRow); the grid is the device's resident
// CTAs; the first wave takes rows by block id, later rows are claimed from a
// device counter that the last CTA to finish resets (Run's launcher also
// zeroes it first, so a garbage workspace is fine; graph replays rely on the
// reset alone: the runner zeroes the counters once).
#include "cta_state.cuh"
#include "routes.h"
#include "select_row.cuh"

namespace topk::cuda {
namespace {

// Persistent schedule: the first wave takes rows by block id, later rows are
// claimed from counters[0] (block-uniform result, one claim per CTA).
template <int kB>
__device__ __forceinline__ int64_t ClaimNextRow(SharedState<kB>& s, const KernelParams& p) {
  if (threadIdx.x == 0) s.next_row = gridDim.x + atomicAdd(&p.counters[0], 1u);
  __syncthreads();
  const int64_t r = s.next_row;
  __syncthreads();
  return r;
}

// Called once per CTA after its last claim: the last CTA to finish restores
// the counters for the next launch (graph replays without a host round trip).
__device__ __forceinline__ void RestoreRowCounters(const KernelParams& p) {
  if (threadIdx.x == 0) {
    __threadfence();
    const uint32_t done = atomicAdd(&p.counters[1], 1u);
    if (done == gridDim.x - 1) {
      atomicExch(&p.counters[0], 0u);
      atomicExch(&p.counters[1], 0u);
    }
  }
}

// kRing: the certification pass streams through the shared-memory ring
// (CudaUseAdmitRing picks the instantiation per shape).
template <int kB, typename Row, bool kRing>
__global__ void __launch_bounds__(kB, PersistentVariant<kB>::kMinBlocks)
    PersistentSelectKernel(const DeviceArgs args_in, const DeviceArgs* __restrict__ dev_args,
                           const __grid_constant__ KernelParams p) {
  extern __shared__ uint4 smem_raw[];
  SharedState<kB>& s = *reinterpret_cast<SharedState<kB>*>(smem_raw);
  ShareCtaArgs(s, args_in, dev_args, p);
  const DeviceArgs& a = s.args;
  const CtaStores& c = s.stores;
  int64_t r = blockIdx.x;
  while (r < a.num_rows) {
    SelectRow<kB, kAdmitUnroll, Row, kRing>(s, a, p, r, c.fa, c.fb, c.out_buf, c.sort_buf);
    r = ClaimNextRow(s, p);
  }
  RestoreRowCounters(p);
}

}  // namespace

size_t PersistentSharedBytes(int block) {
  return block == kSmallThreads ? VariantSharedBytes<kSmallThreads>()
                                : VariantSharedBytes<kThreads>();
}

namespace {

// The kernel of variant kB for one row view and ring choice.
template <int kB, typename Row, bool kRing>
constexpr auto kKernel = PersistentSelectKernel<kB, Row, kRing>;

// Every instantiation of a variant (two row views, with and without the
// ring) shares its launch bounds and shared memory.
template <int kB>
cudaError_t ConfigureVariant() {
  const int smem = static_cast<int>(PersistentSharedBytes(kB));
  for (const auto kernel : {kKernel<kB, F32Row, false>, kKernel<kB, Half16Row, false>,
                            kKernel<kB, F32Row, true>, kKernel<kB, Half16Row, true>}) {
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// The smallest residency over the variant's instantiations (equal in
// practice: the launch bounds fix the registers).
template <int kB>
cudaError_t VariantOccupancy(int* ctas_per_sm) {
  const size_t smem = PersistentSharedBytes(kB);
  int least = 0;
  bool first = true;
  for (const auto kernel : {kKernel<kB, F32Row, false>, kKernel<kB, Half16Row, false>,
                            kKernel<kB, F32Row, true>, kKernel<kB, Half16Row, true>}) {
    int n = 0;
    const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kB, smem);
    if (e != cudaSuccess) return e;
    least = first || n < least ? n : least;
    first = false;
  }
  *ctas_per_sm = least;
  return cudaSuccess;
}

template <int kB, typename Row>
void LaunchRowView(const DeviceArgs& args, const DeviceArgs* dev_args, const KernelParams& params,
                   int grid, cudaStream_t stream) {
  const size_t smem = PersistentSharedBytes(kB);
  if (params.admit_ring != 0) {
    PersistentSelectKernel<kB, Row, true><<<grid, kB, smem, stream>>>(args, dev_args, params);
  } else {
    PersistentSelectKernel<kB, Row, false><<<grid, kB, smem, stream>>>(args, dev_args, params);
  }
}

template <int kB>
void LaunchVariant(const DeviceArgs& args, const DeviceArgs* dev_args, const KernelParams& params,
                   int grid, cudaStream_t stream) {
  if (params.dtype == static_cast<int32_t>(ScoreType::kFloat32)) {
    LaunchRowView<kB, F32Row>(args, dev_args, params, grid, stream);
  } else {
    LaunchRowView<kB, Half16Row>(args, dev_args, params, grid, stream);
  }
}

}  // namespace

cudaError_t ConfigurePersistentRoute() {
  const cudaError_t e = ConfigureVariant<kThreads>();
  if (e != cudaSuccess) return e;
  return ConfigureVariant<kSmallThreads>();
}

cudaError_t PersistentOccupancy(int block, int* ctas_per_sm) {
  return block == kSmallThreads ? VariantOccupancy<kSmallThreads>(ctas_per_sm)
                                : VariantOccupancy<kThreads>(ctas_per_sm);
}

cudaError_t LaunchPersistent(const DeviceArgs& args, const DeviceArgs* dev_args,
                             const KernelParams& params, int grid, cudaStream_t stream) {
  // The small variant stages at most kSmallMaxK outputs in shared memory and
  // its slice has no staging area (the planner never pairs them).
  if (params.block == kSmallThreads && params.k > kSmallMaxK) return cudaErrorInvalidValue;
  if (params.zero_counters != 0) {
    const cudaError_t e = cudaMemsetAsync(params.counters, 0, 2 * sizeof(uint32_t), stream);
    if (e != cudaSuccess) return e;
  }
  if (params.block == kSmallThreads) {
    LaunchVariant<kSmallThreads>(args, dev_args, params, grid, stream);
  } else {
    LaunchVariant<kThreads>(args, dev_args, params, grid, stream);
  }
  return cudaGetLastError();
}

}  // namespace topk::cuda
