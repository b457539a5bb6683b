// The CUDA backend: topk::CudaSelector on one GPU. Each worker copies a
// batch's rows once, from their sources into pinned staging (in chunks, on
// the process's shared copy threads, each run of chunks staged in order
// uploaded on the worker's stream as soon as it is), and replays one captured
// CUDA graph per plan bucket.
// Without CUDA in the build the factories below report why.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backends/backend.h"
#include "server/backends/copy_bytes.h"
#include "server/backends/copy_pool.h"

namespace topk::server {

// The ordinals of usable CUDA devices (an error saying why there are none to
// ask for when the runtime fails or the server was built without CUDA).
absl::StatusOr<std::vector<int>> UsableCudaDevices();

// A Device for CUDA ordinal `ordinal`. With `use_graphs` each worker replays
// one captured CUDA graph per plan bucket instead of launching kernels.
// Each worker stages host rows on its own thread and on `copy_pool`'s
// helpers, which every worker of the process shares.
// `staging_stores` is how the copy writes the pinned staging.
absl::StatusOr<std::unique_ptr<Device>> MakeCudaDevice(int ordinal, bool use_graphs,
                                                       std::shared_ptr<CopyPool> copy_pool,
                                                       CopyStores staging_stores);

}  // namespace topk::server
