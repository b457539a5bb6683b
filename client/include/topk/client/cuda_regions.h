// CUDA regions for co-located clients: device memory and interprocess events
// this process creates and exports to the server (cudaIpcGetMemHandle,
// cudaIpcGetEventHandle), so rows, lengths and outputs stay on the GPU.
//
//   auto buffer = topk::client::CudaIpcBuffer::Create(bytes, /*device=*/0);
//   // ... write rows into buffer->data() on the GPU ...
//   session->RegisterCudaIpc("rows", buffer->ipc_handle(), 0, buffer->size(), buffer->gpu());
//
// The server opens the handle on the GPU named by UUID (ordinals differ
// between processes with different CUDA_VISIBLE_DEVICES). The buffer must
// outlive its registration: free it only after unregistering (or after the
// session ends).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "topk/client/regions.h"
#include "topk/cuda/resources.h"

namespace topk::client {

// The UUID ("GPU-...") of CUDA device `ordinal` in this process.
absl::StatusOr<GpuId> GpuOf(int ordinal);

// A cudaMalloc'd buffer (a whole allocation, so the server's range check
// sees exactly its size), freed on destruction.
class CudaIpcBuffer {
 public:
  static absl::StatusOr<CudaIpcBuffer> Create(size_t bytes, int device);

  std::byte* data() const { return memory_.get(); }
  size_t size() const { return memory_.size(); }
  const std::string& ipc_handle() const { return handle_; }  // 64 bytes
  const GpuId& gpu() const { return gpu_; }

 private:
  CudaIpcBuffer() = default;
  cuda::DeviceBuffer<std::byte> memory_;
  std::string handle_;
  GpuId gpu_;
};

// An interprocess event (no timing), destroyed on destruction. Record it on
// a stream after producing a request's inputs and name it as the request's
// wait_event; or name it as record_event and make a stream wait on it.
class CudaIpcEvent {
 public:
  static absl::StatusOr<CudaIpcEvent> Create(int device);

  cudaEvent_t get() const { return event_.get(); }
  const std::string& ipc_handle() const { return handle_; }  // 64 bytes
  const GpuId& gpu() const { return gpu_; }

 private:
  CudaIpcEvent() = default;
  cuda::Event event_;
  std::string handle_;
  GpuId gpu_;
};

// Registers the whole buffer / the event as `name` in `session`.
absl::Status Register(RegionSession& session, const std::string& name, const CudaIpcBuffer& buffer);
absl::Status Register(RegionSession& session, const std::string& name, const CudaIpcEvent& event);

}  // namespace topk::client
