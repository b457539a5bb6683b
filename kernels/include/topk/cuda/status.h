// The one way host code turns a CUDA runtime error into an absl::Status.
// The status names the call, the file:line and CUDA's own error text, and its
// code says what a caller can do about it (no device, bad argument, out of
// memory, anything else). Callers that must treat every device error as fatal
// for the context (the server) map the returned status, not the cudaError_t.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace topk::cuda {

inline absl::Status CudaStatus(cudaError_t error, const char* expr, const char* file, int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message = absl::StrFormat("%s:%d: %s: %s (%s)", file, line, expr,
                                              cudaGetErrorString(error), cudaGetErrorName(error));
  switch (error) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return absl::FailedPreconditionError(message);
    case cudaErrorInvalidValue:
      return absl::InvalidArgumentError(message);
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace topk::cuda

// Evaluates a CUDA runtime call; on failure returns its CudaStatus from the
// enclosing function (which must return absl::Status or absl::StatusOr<T>).
#define TOPK_CUDA_RETURN_IF_ERROR(expr)                                                 \
  do {                                                                                  \
    if (const cudaError_t topk_cuda_error_ = (expr); topk_cuda_error_ != cudaSuccess) { \
      return ::topk::cuda::CudaStatus(topk_cuda_error_, #expr, __FILE__, __LINE__);     \
    }                                                                                   \
  } while (0)
