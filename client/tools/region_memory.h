// The memory a loadgen transport places its rows and outputs in: a shared-
// memory segment, or (a CUDA build) a CUDA allocation exported over IPC,
// with the copies in and out of it.
#pragma once

#include <cstring>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "topk/client/regions.h"

#if TOPK_LOADGEN_CUDA
#include "topk/client/cuda_regions.h"
#endif

namespace topk::tools {

// Where the next buffer of a region starts: every buffer on a 256-byte
// boundary, as the server's alignment checks and the GPU's wide loads want.
inline uint64_t AlignRegionBytes(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

// The region's memory: host (shared memory) or device (CUDA IPC).
struct RegionMemory {
  client::SharedMemorySegment shm;
#if TOPK_LOADGEN_CUDA
  std::optional<client::CudaIpcBuffer> gpu;
#endif

  std::byte* data() const {
#if TOPK_LOADGEN_CUDA
    if (gpu.has_value()) return gpu->data();
#endif
    return shm.data();
  }

  // The calling thread's current device is made the buffer's first: a
  // caller thread starts on device 0, and a copy issued there for memory on
  // another GPU would open a context on device 0 in this process (which
  // then time-shares that GPU with the server) and cross GPUs to read.
  absl::Status UseDevice() const {
#if TOPK_LOADGEN_CUDA
    if (gpu.has_value() && cudaSetDevice(gpu->gpu().ordinal) != cudaSuccess) {
      return absl::InternalError(absl::StrCat("cudaSetDevice(", gpu->gpu().ordinal, ") failed"));
    }
#endif
    return absl::OkStatus();
  }

  absl::Status Write(uint64_t at, const void* bytes, size_t size) const {
#if TOPK_LOADGEN_CUDA
    if (gpu.has_value()) {
      if (absl::Status s = UseDevice(); !s.ok()) return s;
      if (cudaMemcpy(data() + at, bytes, size, cudaMemcpyHostToDevice) != cudaSuccess) {
        return absl::InternalError("cudaMemcpy to the IPC buffer failed");
      }
      return absl::OkStatus();
    }
#endif
    std::memcpy(data() + at, bytes, size);
    return absl::OkStatus();
  }

  absl::Status Read(uint64_t at, void* bytes, size_t size) const {
#if TOPK_LOADGEN_CUDA
    if (gpu.has_value()) {
      if (absl::Status s = UseDevice(); !s.ok()) return s;
      if (cudaMemcpy(bytes, data() + at, size, cudaMemcpyDeviceToHost) != cudaSuccess) {
        return absl::InternalError("cudaMemcpy from the IPC buffer failed");
      }
      return absl::OkStatus();
    }
#endif
    std::memcpy(bytes, data() + at, size);
    return absl::OkStatus();
  }
};

}  // namespace topk::tools
