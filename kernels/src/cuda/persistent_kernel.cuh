// Launch interface of the persistent selector kernel (host side, nvcc only).
#pragma once

#include <cuda_runtime.h>

#include "kernel_args.h"

namespace topk::cuda {

// Raises the kernel's dynamic shared memory limit; call once per device.
cudaError_t ConfigurePersistentKernel();
// Resident CTAs per SM of the persistent kernel variant of `block` threads
// (kThreads or kSmallThreads) and its dynamic shared memory.
cudaError_t PersistentOccupancy(int block, int* ctas_per_sm);
size_t PersistentSharedBytes(int block);

// One launch of `grid` persistent CTAs. dev_args: when non-null the kernel
// reads the per-call arguments from device memory (graph replays) and `args`
// is ignored.
cudaError_t LaunchPersistent(const DeviceArgs& args, const DeviceArgs* dev_args,
                             const KernelParams& params, int grid, cudaStream_t stream);

// The register-resident direct-exact kernel (512 threads, the persistent
// kernel's shared memory and slices; K <= kSmemOutput): its residency and
// one launch (row claim counters zeroed first, like LaunchPersistent).
cudaError_t RegisterExactOccupancy(int* ctas_per_sm);
cudaError_t LaunchRegisterExact(const DeviceArgs& args, const DeviceArgs* dev_args,
                                const KernelParams& params, int grid, cudaStream_t stream);

// One launch of the KV-split kernel: grid = max_rows * split CTAs; zeroes the
// per-row state first (a captured memset node under graph capture).
cudaError_t LaunchKvSplit(const DeviceArgs& args, const DeviceArgs* dev_args,
                          const KernelParams& params, int grid, cudaStream_t stream);

// Benchmark/test helpers.
cudaError_t LaunchVerify(const DeviceArgs& args, int32_t k, int64_t num_rows,
                         unsigned long long* bad_rows, int* first_bad, cudaStream_t stream);

}  // namespace topk::cuda
