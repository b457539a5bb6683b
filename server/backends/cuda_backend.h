// The CUDA backend: topk::CudaSelector on one GPU. Each worker copies a
// batch's rows once, from their sources into pinned staging (in chunks, on
// its copy threads, each chunk uploaded on its own stream as soon as it is
// staged), and replays one captured CUDA graph per plan bucket.
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
// Each worker stages host rows with `copy_helpers` threads besides its own.
absl::StatusOr<std::unique_ptr<Device>> MakeCudaDevice(int ordinal, bool use_graphs,
                                                       int copy_helpers);

}  // namespace topk::server
