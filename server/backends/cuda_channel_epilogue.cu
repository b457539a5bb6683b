#include <algorithm>
#include <limits>

#include "server/backends/cuda_channel_epilogue.h"
#include "topk/cuda/status.h"

namespace topk::server {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kElementsPerCta = kThreads * 8;
constexpr int kMaxCtas = 1024;
constexpr int32_t kNoRow = 0x7fffffff;

// The first row whose status is not kOk (kNoRow when none), over the CTA.
__device__ int32_t FirstBadRow(const RowStatus* status, int64_t rows) {
  __shared__ int32_t first;
  if (threadIdx.x == 0) first = kNoRow;
  __syncthreads();
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    if (status[r] != RowStatus::kOk) atomicMin(&first, static_cast<int32_t>(r));
  }
  __syncthreads();
  return first;
}

template <typename Element>
__device__ void PlaceRows(const ChannelEpilogueArgs& a, Element nan) {
  const auto* scores = static_cast<const Element*>(a.scores);
  auto* values = static_cast<Element*>(a.values);
  const int64_t total = a.num_rows * a.k;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / a.k;
    const int64_t j = i - r * a.k;
    const int32_t index = a.staged[i];
    const int64_t at = r * a.stride + j;
    a.indices[at] = index;
    if (values != nullptr) values[at] = index >= 0 ? scores[r * a.row_pitch + index] : nan;
  }
}

__device__ uint32_t StatusWord(RowStatus status) {
  return status == RowStatus::kNan ? TOPK_CHANNEL_NAN : TOPK_CHANNEL_BAD_LENGTH;
}

template <typename Element>
__global__ void __launch_bounds__(kThreads) ChannelEpilogue(ChannelEpilogueArgs a, Element nan) {
  const int32_t bad = FirstBadRow(a.row_status, a.num_rows);
  if (bad == kNoRow) PlaceRows(a, nan);
  // The last CTA answers, after every CTA's stores are visible.
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(a.finished, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last || threadIdx.x != 0) return;
  *a.finished = 0;
  topk_channel_control* c = a.control;
  if (bad == kNoRow) {
    c->status = TOPK_CHANNEL_OK;
    c->status_row = -1;
    c->status_value = 0;
  } else {
    c->status = StatusWord(a.row_status[bad]);
    c->status_row = bad;
    c->status_value = a.lengths[bad];
  }
  __threadfence_system();
  c->done = 1;
}

}  // namespace

absl::Status LaunchChannelEpilogue(const ChannelEpilogueArgs& args, cudaStream_t stream) {
  const int64_t total = args.num_rows * args.k;
  const int ctas = static_cast<int>(std::min<int64_t>(
      kMaxCtas, std::max<int64_t>(1, (total + kElementsPerCta - 1) / kElementsPerCta)));
  if (args.dtype == ScoreType::kFloat32) {
    ChannelEpilogue<float>
        <<<ctas, kThreads, 0, stream>>>(args, std::numeric_limits<float>::quiet_NaN());
  } else {
    const uint16_t nan = args.dtype == ScoreType::kBFloat16 ? 0x7fc0 : 0x7e00;
    ChannelEpilogue<uint16_t><<<ctas, kThreads, 0, stream>>>(args, nan);
  }
  TOPK_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace topk::server
