// The host's check of a channel call's descriptor (written by the client,
// so anything may be in it) against the channel's regions and caps: every
// byte the call would read or write must lie inside a region the channel
// names, aligned to its element, with no output overlapping an input or
// the other output. A pure function, tested without a server or a GPU.
#pragma once

#include <cstdint>

#include "absl/types/span.h"
#include "server/backends/channel_executor.h"
#include "topk/v1/channel_block.h"

namespace topk::server {

// A region as the executor addresses it (device memory for a GPU, host
// memory for shared memory).
struct ChannelRegionView {
  std::byte* data = nullptr;
  uint64_t byte_size = 0;
};

// TOPK_CHANNEL_OK with `call` resolved, or the status word (and the
// offending row and value) the call is answered with.
struct CheckedCall {
  uint32_t status = TOPK_CHANNEL_OK;
  int32_t row = -1;
  int64_t value = 0;
  ChannelCall call;
};

CheckedCall CheckChannelCall(const topk_channel_descriptor& desc, const ChannelSpec& spec,
                             absl::Span<const ChannelRegionView> regions);

}  // namespace topk::server
