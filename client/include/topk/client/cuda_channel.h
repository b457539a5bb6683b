// A channel call enqueued on a CUDA stream: the descriptor, ready = 1, a
// wait for done == 1 and done = 0, as one batch of stream memory operations
// (cuStreamBatchMemOp) on the caller's stream. Nothing on the host waits,
// and every value is a constant, so the call can be captured in a CUDA graph
// and replayed. The control block is registered as mapped host memory once
// per channel (RegisterChannelForStreams). CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "topk/client/channel.h"

namespace topk::client {

// Registers the channel's control block with the CUDA driver (mapped host
// memory) so that streams can write and wait on it; idempotent. Unregistered
// by UnregisterChannelForStreams (before the channel is destroyed).
absl::Status RegisterChannelForStreams(const Channel& channel);
absl::Status UnregisterChannelForStreams(const Channel& channel);

// Enqueues one call on `stream`. The call's status is in the control block
// once the stream passes it (Channel::LastStatus after synchronising).
absl::Status EnqueueChannelCall(const Channel& channel, cudaStream_t stream,
                                const topk_channel_descriptor& call);

}  // namespace topk::client
