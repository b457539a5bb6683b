// The CUDA backend: topk::CudaSelector on one GPU, rows uploaded through
// pinned staging buffers on the worker's own stream. Only built when the
// server is compiled with TOPK_HAVE_CUDA.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/engine/backend.h"

namespace topk::server {

// The ordinals of usable CUDA devices (empty and a reason when none is, or
// when the server was built without CUDA).
absl::StatusOr<std::vector<int>> UsableCudaDevices();

// A Device for CUDA ordinal `ordinal`. With `use_graphs` each worker replays
// one captured CUDA graph per plan bucket instead of launching kernels.
absl::StatusOr<std::unique_ptr<Device>> MakeCudaDevice(int ordinal, bool use_graphs);

}  // namespace topk::server
