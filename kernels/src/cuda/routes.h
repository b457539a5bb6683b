// Launch interface of the selector's kernel routes (host side, nvcc only):
// the persistent route (persistent_route.cu) and the sampled KV-split route
// (kv_split_route.cu), which both run SelectRow (select_row.cuh) on the CTA
// state of cta_state.cuh, the short-row route (short_row_route.cu) and the
// cluster route (cluster_route.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernel_args.h"

namespace topk::cuda {

// Raise each route kernel's dynamic shared memory limit; call once per device.
cudaError_t ConfigurePersistentRoute();
cudaError_t ConfigureKvSplitRoute();
cudaError_t ConfigureShortRowRoute();
cudaError_t ConfigureClusterRoute();
cudaError_t ConfigureResidentRoute();

// Resident CTAs per SM of the persistent kernel variant of `block` threads
// (kThreads or kSmallThreads) and its dynamic shared memory (the KV-split
// kernel uses the kThreads figure).
cudaError_t PersistentOccupancy(int block, int* ctas_per_sm);
size_t PersistentSharedBytes(int block);

// One launch of `grid` persistent CTAs. dev_args: when non-null the kernel
// reads the per-call arguments from device memory (graph replays) and `args`
// is ignored.
cudaError_t LaunchPersistent(const DeviceArgs& args, const DeviceArgs* dev_args,
                             const KernelParams& params, int grid, cudaStream_t stream);

// One launch of the KV-split kernel: grid = max_rows * split CTAs; zeroes the
// per-row state first (a captured memset node under graph capture).
cudaError_t LaunchKvSplit(const DeviceArgs& args, const DeviceArgs* dev_args,
                          const KernelParams& params, int grid, cudaStream_t stream);

// The short-row kernel: dynamic shared memory for rank k (staged: sorted or
// deterministic output), and one launch of `grid` CTAs that take rows
// blockIdx.x, blockIdx.x + grid, ...
size_t ShortRowSharedBytes(int32_t k, bool staged);
cudaError_t LaunchShortRow(const DeviceArgs& args, const DeviceArgs* dev_args,
                           const KernelParams& params, int grid, cudaStream_t stream);

// The cluster route (cluster_route.cu): the most clusters of `ranks` CTAs
// (8, or 16 non-portable) resident at once with ctas_per_sm (1 or 2) CTAs
// per SM (0: the device cannot run them), and one launch of `grid` =
// clusters x params.split CTAs, each cluster taking rows cluster id,
// + clusters, ... No memset node: the kernel keeps no per-launch state in the
// workspace.
cudaError_t ClusterOccupancy(int ranks, int ctas_per_sm, int* clusters);
cudaError_t LaunchCluster(const DeviceArgs& args, const DeviceArgs* dev_args,
                          const KernelParams& params, int grid, cudaStream_t stream);

// The resident decode route (decode_route.cu): the most clusters of `ranks`
// CTAs (1..16) resident at once with the largest slice (0: the device cannot
// run them), and one launch of `grid` = clusters x params.split CTAs, each
// cluster taking rows cluster id, + clusters, ... Header-only workspace.
cudaError_t ResidentOccupancy(int ranks, int* clusters);
cudaError_t LaunchResident(const DeviceArgs& args, const DeviceArgs* dev_args,
                           const KernelParams& params, int grid, cudaStream_t stream);

}  // namespace topk::cuda
