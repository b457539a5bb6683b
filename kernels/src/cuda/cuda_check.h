// Every CUDA call is checked: a failure becomes an absl::Status naming the
// call, the file:line and the CUDA error text.
#pragma once

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace topk::cuda {

inline absl::Status CudaStatus(cudaError_t e, const char* expr, const char* file, int line) {
  if (e == cudaSuccess) return absl::OkStatus();
  const std::string msg = absl::StrFormat("%s:%d: %s: %s (%s)", file, line, expr,
                                          cudaGetErrorString(e), cudaGetErrorName(e));
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
    return absl::FailedPreconditionError(msg);
  }
  if (e == cudaErrorInvalidValue) return absl::InvalidArgumentError(msg);
  if (e == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

}  // namespace topk::cuda

#define TOPK_CUDA_RETURN_IF_ERROR(expr)                                           \
  do {                                                                            \
    const cudaError_t topk_cuda_err_ = (expr);                                    \
    if (topk_cuda_err_ != cudaSuccess) {                                          \
      return ::topk::cuda::CudaStatus(topk_cuda_err_, #expr, __FILE__, __LINE__); \
    }                                                                             \
  } while (0)
