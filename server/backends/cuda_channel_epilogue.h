// The last kernel of a channel call on the GPU: decides from the rows'
// statuses whether the call is answered, places the staged indices (and
// gathered values) in the client's outputs only when every row is OK, then
// writes the control block's status and done = 1 (the last CTA to finish,
// after a system-scope fence), so the host never waits for the call.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "topk/channel/control_block.h"
#include "topk/contract.h"

namespace topk::server {

struct ChannelEpilogueArgs {
  const int32_t* staged = nullptr;  // num_rows x k, the selector's output
  const RowStatus* row_status = nullptr;
  const int32_t* lengths = nullptr;  // reported with a bad length
  const void* scores = nullptr;      // the rows, elements of `dtype`
  int64_t row_pitch = 0;
  ScoreType dtype = ScoreType::kFloat32;
  int64_t num_rows = 0;
  int32_t k = 0;
  int32_t* indices = nullptr;  // the client's, at `stride`
  void* values = nullptr;      // the client's (null: no values)
  int64_t stride = 0;
  topk_channel_control* control = nullptr;  // device alias of the host-mapped block
  unsigned* finished = nullptr;             // CTAs done; zero between calls
};

// Enqueues the epilogue on `stream`.
absl::Status LaunchChannelEpilogue(const ChannelEpilogueArgs& args, cudaStream_t stream);

}  // namespace topk::server
