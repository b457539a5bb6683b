#include "topk/client/cuda_regions.h"

#include <utility>

#include "topk/cuda/device_uuid.h"
#include "topk/cuda/status.h"

namespace topk::client {

absl::StatusOr<GpuId> GpuOf(int ordinal) {
  cudaDeviceProp prop{};
  TOPK_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, ordinal));
  return GpuId{.uuid = cuda::DeviceUuidString(prop.uuid), .ordinal = ordinal};
}

absl::StatusOr<CudaIpcBuffer> CudaIpcBuffer::Create(size_t bytes, int device) {
  TOPK_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  CudaIpcBuffer buffer;
  absl::StatusOr<GpuId> gpu = GpuOf(device);
  if (!gpu.ok()) return gpu.status();
  buffer.gpu_ = *std::move(gpu);
  absl::StatusOr<cuda::DeviceBuffer<std::byte>> memory = cuda::AllocateDevice<std::byte>(bytes);
  if (!memory.ok()) return memory.status();
  buffer.memory_ = *std::move(memory);
  cudaIpcMemHandle_t handle{};
  TOPK_CUDA_RETURN_IF_ERROR(cudaIpcGetMemHandle(&handle, buffer.memory_.get()));
  buffer.handle_.assign(reinterpret_cast<const char*>(&handle), sizeof(handle));
  return buffer;
}

absl::StatusOr<CudaIpcEvent> CudaIpcEvent::Create(int device) {
  TOPK_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  CudaIpcEvent event;
  absl::StatusOr<GpuId> gpu = GpuOf(device);
  if (!gpu.ok()) return gpu.status();
  event.gpu_ = *std::move(gpu);
  absl::StatusOr<cuda::Event> created =
      cuda::CreateEvent(cudaEventInterprocess | cudaEventDisableTiming);
  if (!created.ok()) return created.status();
  event.event_ = *std::move(created);
  cudaIpcEventHandle_t handle{};
  TOPK_CUDA_RETURN_IF_ERROR(cudaIpcGetEventHandle(&handle, event.event_.get()));
  event.handle_.assign(reinterpret_cast<const char*>(&handle), sizeof(handle));
  return event;
}

absl::Status Register(RegionSession& session, const std::string& name,
                      const CudaIpcBuffer& buffer) {
  return session.RegisterCudaIpc(name, buffer.ipc_handle(), 0, buffer.size(), buffer.gpu());
}

absl::Status Register(RegionSession& session, const std::string& name, const CudaIpcEvent& event) {
  return session.RegisterCudaEvent(name, event.ipc_handle(), event.gpu());
}

}  // namespace topk::client
