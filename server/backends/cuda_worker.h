// What the CUDA backend's two halves share: the worker (cuda_backend.cc:
// staging, upload, graph replay, answer placement) and the device that
// makes workers and describes its GPU (cuda_device.cc). CUDA builds only.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/backends/backend.h"
#include "server/backends/cuda_backend.h"

namespace topk::server {

// The server treats every CUDA failure as sticky (UNAVAILABLE, whatever its
// code): after an error the context may be unusable, and a wrong answer is
// worse than no answer. The engine then stops using the device.
inline absl::Status DeviceLost(const absl::Status& status) {
  if (status.ok()) return status;
  return absl::UnavailableError(status.message());
}

// One worker on GPU `ordinal` with its buffers allocated for `limits`
// (MakeCudaDevice's parameters otherwise).
absl::StatusOr<std::unique_ptr<WorkerBackend>> CreateCudaWorker(int ordinal, bool use_graphs,
                                                                std::shared_ptr<CopyPool> copy_pool,
                                                                CopyStores staging_stores,
                                                                const RequestLimits& limits);

}  // namespace topk::server
