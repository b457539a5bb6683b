// The CUDA kinds of region: memory and events another process exported with
// cudaIpcGetMemHandle / cudaIpcGetEventHandle, opened on the GPU the client
// names. This header needs no CUDA; a build without it refuses both kinds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/regions/region.h"

namespace topk::server {

// The size in bytes of both CUDA IPC handle types.
inline constexpr size_t kCudaIpcHandleBytes = 64;

// A GPU as a client names it: by UUID ("GPU-..."), else by ordinal.
struct GpuName {
  std::string uuid;
  int32_t ordinal = 0;
};

// Opens a cudaIpcMemHandle_t (`handle`: exactly 64 bytes) on the named GPU
// and checks [offset, offset + byte_size) against the allocation's real
// extent. `served_ordinals`: the GPUs the server serves (any other is
// INVALID_ARGUMENT). UNIMPLEMENTED in a build without CUDA.
absl::StatusOr<std::unique_ptr<Region>> OpenCudaIpcRegion(absl::string_view handle, uint64_t offset,
                                                          uint64_t byte_size, const GpuName& device,
                                                          absl::Span<const int> served_ordinals);

// Opens a cudaIpcEventHandle_t (exactly 64 bytes) on the named GPU.
absl::StatusOr<std::unique_ptr<Region>> OpenCudaIpcEvent(absl::string_view handle,
                                                         const GpuName& device,
                                                         absl::Span<const int> served_ordinals);

}  // namespace topk::server
