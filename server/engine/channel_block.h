// A channel's control block (proto/topk/v1/channel_block.h) as the server
// owns it: a POSIX shared-memory object it creates under an unguessable
// name with mode 0600 (so only the server's user can open it, and a client
// that dies cannot take it away), maps, and unlinks when the channel closes.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "topk/v1/channel_block.h"

namespace topk::server {

class ChannelBlock {
 public:
  // A new zeroed block. INTERNAL with the OS's error text when the object
  // cannot be made or mapped.
  static absl::StatusOr<std::unique_ptr<ChannelBlock>> Create();
  ~ChannelBlock();
  ChannelBlock(const ChannelBlock&) = delete;
  ChannelBlock& operator=(const ChannelBlock&) = delete;

  // "/topk-ch-" followed by 32 hex digits.
  const std::string& name() const { return name_; }
  topk_channel_control* control() const { return control_; }

 private:
  ChannelBlock(std::string name, topk_channel_control* control)
      : name_(std::move(name)), control_(control) {}
  std::string name_;
  topk_channel_control* control_;
};

}  // namespace topk::server
