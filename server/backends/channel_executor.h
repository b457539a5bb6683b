// What a backend does for a channel (docs/channels.md): selects one call's
// rows into its outputs and then answers it in the channel's control block
// (status, then done = 1), without the host waiting for the device. The
// engine's channel registry takes calls from the control block, checks
// their descriptors against the channel's regions, and hands valid ones
// here with the pointers resolved.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "topk/channel/control_block.h"
#include "topk/contract.h"

namespace topk::server {

// What a channel serves, fixed when it opens.
struct ChannelSpec {
  int32_t k = 0;
  SelectOptions options;
  bool return_values = false;
  ScoreType dtype = ScoreType::kFloat32;
  int64_t max_rows = 0;   // M_cap
  int64_t max_width = 0;  // N_cap
  // The control block, mapped in this process (host memory); the executor
  // writes status and done there when a call completes.
  topk_channel_control* control = nullptr;
};

// One checked call: pointers in the executor's memory space (the GPU's for
// CUDA, the host's for the CPU), every byte they reach inside the channel's
// regions.
struct ChannelCall {
  const void* scores = nullptr;  // elements of the channel's dtype
  int64_t row_pitch = 0;         // elements, >= width
  int64_t width = 0;             // the bound of every length (<= max_width)
  const int32_t* lengths = nullptr;
  int64_t num_rows = 0;  // 1..max_rows
  int32_t* indices = nullptr;
  void* values = nullptr;  // null unless the channel returns values
  int64_t out_row_stride = 0;
};

class ChannelExecutor {
 public:
  virtual ~ChannelExecutor() = default;

  // Starts the call. On the GPU it returns once the work is enqueued; the
  // device then writes status (from the rows' statuses: a bad length or a
  // NaN row refuses the call and no output is written) and done = 1. On the
  // host it returns after doing the same. An error means nothing was
  // started: the caller answers the call itself.
  virtual absl::Status Launch(const ChannelCall& call) = 0;
  // Whether the last launched call has completed (its done word written).
  virtual bool Idle() = 0;
  // Waits until Idle() (closing the channel).
  virtual void Drain() = 0;
  // The plan the executor runs, in one line.
  virtual std::string Describe() const = 0;
};

}  // namespace topk::server
