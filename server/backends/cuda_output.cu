#include <limits>

#include "server/backends/cuda_output.h"
#include "topk/cuda/status.h"

namespace topk::server {
namespace {

// Element: float for FP32, the raw uint16_t pattern for BF16 / FP16 (values
// are copied in the input type, never converted).
template <typename Element>
__global__ void PlaceOutputKernel(PlaceOutputArgs args, Element nan) {
  const auto* scores = static_cast<const Element*>(args.scores);
  auto* target_values = static_cast<Element*>(args.target_values);
  const int64_t total = args.num_rows * args.k;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / args.k;
    const int64_t j = i - r * args.k;
    const int32_t index = args.indices[i];
    const int64_t at = r * args.stride + j;
    if (args.target_indices != nullptr) args.target_indices[at] = index;
    if (target_values != nullptr) {
      const bool answered = args.row_status[r] == RowStatus::kOk && index >= 0;
      target_values[at] = answered ? scores[args.row_offsets[r] + index] : nan;
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
  if (args.dtype == ScoreType::kFloat32) {
    PlaceOutputKernel<float>
        <<<blocks, kThreads, 0, stream>>>(args, std::numeric_limits<float>::quiet_NaN());
  } else {
    // The quiet NaN of each 16-bit type (as QuietNanBits in backend.h).
    const uint16_t nan = args.dtype == ScoreType::kBFloat16 ? 0x7fc0 : 0x7e00;
    PlaceOutputKernel<uint16_t><<<blocks, kThreads, 0, stream>>>(args, nan);
  }
  TOPK_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace topk::server
