// Channels on the CPU backend: the call's rows, lengths and outputs are in
// shared-memory regions; the registry's poller thread runs the selection
// itself and answers in the control block before it looks at the next
// call. For co-located CPU deployments and for testing the protocol without
// a GPU.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "server/backends/channel_executor.h"

namespace topk::server {

absl::StatusOr<std::unique_ptr<ChannelExecutor>> MakeCpuChannelExecutor(const ChannelSpec& spec,
                                                                        int threads);

}  // namespace topk::server
