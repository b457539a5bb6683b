// The answer of a selection placed where a request by reference wants it on
// the GPU: indices at the client's row stride, and values gathered from the
// rows on the device (the host never holds scores that live on a GPU).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "topk/contract.h"

namespace topk::server {

struct PlaceOutputArgs {
  const int32_t* indices = nullptr;  // the selector's: num_rows x k, stride k
  const RowStatus* row_status = nullptr;
  const void* scores = nullptr;  // the rows the selection read, elements of `dtype`
  ScoreType dtype = ScoreType::kFloat32;
  const int64_t* row_offsets = nullptr;
  int64_t num_rows = 0;
  int32_t k = 0;
  // Where indices go at `stride` (null: they already are where they belong).
  int32_t* target_indices = nullptr;
  // Where values go at `stride` (null: no values): the score at each index,
  // in `dtype`, a quiet NaN at -1 slots and in rows whose status is not kOk.
  void* target_values = nullptr;
  int64_t stride = 0;
};

// Enqueues the placement on `stream`.
absl::Status PlaceOutputOnDevice(const PlaceOutputArgs& args, cudaStream_t stream);

}  // namespace topk::server
