// Channels on the CUDA backend: each channel owns a stream, a workspace, a
// captured graph of its plan (replayed with each call's pointers) and the
// staging its epilogue places from. Nothing it enqueues waits on anything,
// so an idle channel holds no pending work on the GPU (docs/channels.md:
// a stream left waiting on a flag blocks the process's allocations).
// CUDA builds only.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "server/backends/channel_executor.h"

namespace topk::server {

absl::StatusOr<std::unique_ptr<ChannelExecutor>> MakeCudaChannelExecutor(const ChannelSpec& spec,
                                                                         int ordinal);

// Whether contexts on GPU `ordinal` are MPS clients.
bool CudaDeviceUnderMps(int ordinal);

}  // namespace topk::server
