#include "server/backends/cuda_output.h"
#include "topk/cuda/status.h"

namespace topk::server {
namespace {

__global__ void PlaceOutputKernel(PlaceOutputArgs args) {
  const int64_t total = args.num_rows * args.k;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / args.k;
    const int64_t j = i - r * args.k;
    const int32_t index = args.indices[i];
    const int64_t at = r * args.stride + j;
    if (args.target_indices != nullptr) args.target_indices[at] = index;
    if (args.target_values != nullptr) {
      const bool answered = args.row_status[r] == RowStatus::kOk && index >= 0;
      args.target_values[at] =
          answered ? args.scores[args.row_offsets[r] + index] : __int_as_float(0x7fc00000);
    }
  }
}

}  // namespace

absl::Status PlaceOutputOnDevice(const PlaceOutputArgs& args, cudaStream_t stream) {
  const int64_t total = args.num_rows * args.k;
  if (total == 0 || (args.target_indices == nullptr && args.target_values == nullptr)) {
    return absl::OkStatus();
  }
  constexpr int kThreads = 256;
  const int blocks = static_cast<int>(
      (total + kThreads - 1) / kThreads < 4096 ? (total + kThreads - 1) / kThreads : 4096);
  PlaceOutputKernel<<<blocks, kThreads, 0, stream>>>(args);
  TOPK_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace topk::server
