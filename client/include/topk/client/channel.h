// A GPU-ordered channel (docs/channels.md): Top-K calls with no RPC and no
// host round trip. Open one per caller stream in a region session, naming
// the regions its rows, lengths and outputs live in; then each call is a
// descriptor written into the server's control block followed by a
// hand-off on the words beside it (proto/topk/channel/control_block.h).
//
//   auto channel = topk::client::Channel::Open(*session, {.k = 2048, .max_rows = 64,
//                                              .max_width = 131072,
//                                              .regions = {"scores", "lengths", "out"}});
//   topk_channel_descriptor call = {.num_rows = 8, .scores_region = 0, ...};
//   EnqueueChannelCall(*channel, stream, call);   // cuda_channel.h: on a CUDA stream
//   absl::Status done = channel->CallOnHost(call);  // or from the host (shared memory)
//
// One call at a time per channel: a call's hand-off words are a binary
// semaphore, so calls from two streams need two channels.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "topk/channel/control_block.h"
#include "topk/client/regions.h"
#include "topk/v1/topk.grpc.pb.h"

namespace topk::client {

struct ChannelOptions {
  int32_t k = 0;
  bool sorted = false;
  bool deterministic = false;
  bool return_values = false;
  v1::ScoreType dtype = v1::SCORE_TYPE_FP32;
  int32_t max_rows = 0;
  int32_t max_width = 0;
  // The session's region names; a descriptor's region fields index this.
  std::vector<std::string> regions;
};

// The error a call's status word stands for: INVALID_ARGUMENT naming the
// descriptor field (and the row), UNAVAILABLE for a closed channel,
// INTERNAL for a device failure; OK for TOPK_CHANNEL_OK.
absl::Status ChannelStatusToError(uint32_t status, int32_t row, int64_t value);

class Channel {
 public:
  static absl::StatusOr<std::unique_ptr<Channel>> Open(RegionSession& session,
                                                       const ChannelOptions& options);
  ~Channel();  // CloseChannel, then unmaps the block
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // A call from the host: writes the descriptor and ready, waits (spinning,
  // then sleeping) until done or `timeout`, resets done, and returns the
  // call's status as an error (DEADLINE_EXCEEDED past the timeout).
  absl::Status CallOnHost(const topk_channel_descriptor& call,
                          absl::Duration timeout = absl::Seconds(10));
  // The status of the last completed call.
  absl::Status LastStatus() const;
  // Calls answered and refused, as the server counts them.
  uint64_t calls() const { return control_->calls; }
  uint64_t errors() const { return control_->errors; }

  const std::string& id() const { return id_; }
  const std::string& plan() const { return plan_; }
  topk_channel_control* control() const { return control_; }
  const ChannelOptions& options() const { return options_; }

 private:
  Channel() = default;
  std::unique_ptr<v1::TopK::Stub> stub_;
  std::string session_;
  std::string id_;
  std::string plan_;
  ChannelOptions options_;
  topk_channel_control* control_ = nullptr;
};

}  // namespace topk::client
