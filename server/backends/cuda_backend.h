// The CUDA backend: topk::CudaSelector on one GPU. Each worker copies a
// request's rows once, from their source into pinned staging, uploads them
// on its own stream, and replays one captured CUDA graph per plan bucket.
// Without CUDA in the build the factories below report why.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backends/backend.h"

namespace topk::server {

// The ordinals of usable CUDA devices (an error saying why there are none to
// ask for when the runtime fails or the server was built without CUDA).
absl::StatusOr<std::vector<int>> UsableCudaDevices();

// A Device for CUDA ordinal `ordinal`. With `use_graphs` each worker replays
// one captured CUDA graph per plan bucket instead of launching kernels.
absl::StatusOr<std::unique_ptr<Device>> MakeCudaDevice(int ordinal, bool use_graphs);

}  // namespace topk::server
