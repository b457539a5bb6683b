// The CUDA backend's devices: which GPUs can be used, and a Device per GPU
// that describes it and makes its workers (cuda_backend.cc). Without CUDA in
// the build the factories report why.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/cuda_backend.h"

#if TOPK_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "server/backends/cuda_channel.h"
#include "server/backends/cuda_worker.h"
#include "topk/cuda/device_uuid.h"
#include "topk/cuda/resources.h"
#include "topk/cuda/status.h"
#include "topk/cuda_selector.h"
#endif

namespace topk::server {

#if !TOPK_HAVE_CUDA

absl::StatusOr<std::vector<int>> UsableCudaDevices() {
  return absl::UnimplementedError("the server was built without CUDA");
}

absl::StatusOr<std::unique_ptr<Device>> MakeCudaDevice(int ordinal, bool /*use_graphs*/,
                                                       std::shared_ptr<CopyPool> /*copy_pool*/,
                                                       CopyStores /*staging_stores*/) {
  return absl::UnimplementedError(
      absl::StrCat("CUDA device ", ordinal, ": the server was built without CUDA"));
}

#else  // TOPK_HAVE_CUDA

namespace {

class CudaDevice final : public Device {
 public:
  CudaDevice(int ordinal, bool use_graphs, std::shared_ptr<CopyPool> copy_pool,
             CopyStores staging_stores, DeviceDescription description)
      : ordinal_(ordinal),
        use_graphs_(use_graphs),
        copy_pool_(std::move(copy_pool)),
        staging_stores_(staging_stores),
        description_(std::move(description)) {}

  std::string backend_name() const override { return "cuda"; }
  DeviceDescription description() const override { return description_; }

  // From the metrics thread: cudaMemGetInfo reports the current device's.
  int64_t memory_used_bytes() const override {
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    if (cudaSetDevice(ordinal_) != cudaSuccess ||
        cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      return -1;
    }
    return static_cast<int64_t>(total_bytes - free_bytes);
  }

  absl::StatusOr<std::unique_ptr<WorkerBackend>> CreateWorker(
      const RequestLimits& limits) override {
    return CreateCudaWorker(ordinal_, use_graphs_, copy_pool_, staging_stores_, limits);
  }

  // An event recorded on a stream of the probe's own and queried: both go
  // through the context, so a sticky error there comes back here.
  absl::Status Probe() override {
    TOPK_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal_));
    if (probe_stream_ == nullptr) {
      absl::StatusOr<cuda::Stream> stream = cuda::CreateStream();
      if (!stream.ok()) return stream.status();
      absl::StatusOr<cuda::Event> event = cuda::CreateEvent(cudaEventDisableTiming);
      if (!event.ok()) return event.status();
      probe_stream_ = *std::move(stream);
      probe_event_ = *std::move(event);
    }
    TOPK_CUDA_RETURN_IF_ERROR(cudaEventRecord(probe_event_.get(), probe_stream_.get()));
    const cudaError_t state = cudaEventQuery(probe_event_.get());
    if (state != cudaSuccess && state != cudaErrorNotReady) TOPK_CUDA_RETURN_IF_ERROR(state);
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<ChannelExecutor>> OpenChannel(const ChannelSpec& spec) override {
    return MakeCudaChannelExecutor(spec, ordinal_);
  }

  bool mps() const override { return CudaDeviceUnderMps(ordinal_); }

 private:
  int ordinal_;
  bool use_graphs_;
  std::shared_ptr<CopyPool> copy_pool_;
  CopyStores staging_stores_;
  DeviceDescription description_;
  // The device watch's (created on its first probe, on its thread).
  cuda::Stream probe_stream_;
  cuda::Event probe_event_;
};

absl::StatusOr<std::vector<int>> UsableCudaDevicesOrCudaError() {
  int count = 0;
  TOPK_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  std::vector<int> usable;
  for (int d = 0; d < count; ++d) {
    // A device is usable when a context can be made on it.
    if (cudaSetDevice(d) == cudaSuccess && cudaFree(nullptr) == cudaSuccess) usable.push_back(d);
  }
  return usable;
}

absl::StatusOr<cudaDeviceProp> Properties(int ordinal) {
  cudaDeviceProp prop{};
  TOPK_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, ordinal));
  return prop;
}

}  // namespace

absl::StatusOr<std::vector<int>> UsableCudaDevices() {
  absl::StatusOr<std::vector<int>> usable = UsableCudaDevicesOrCudaError();
  if (!usable.ok()) return DeviceLost(usable.status());
  return usable;
}

absl::StatusOr<std::unique_ptr<Device>> MakeCudaDevice(int ordinal, bool use_graphs,
                                                       std::shared_ptr<CopyPool> copy_pool,
                                                       CopyStores staging_stores) {
  absl::StatusOr<cudaDeviceProp> prop = Properties(ordinal);
  if (!prop.ok()) return DeviceLost(prop.status());
  DeviceDescription description{.ordinal = ordinal,
                                .name = prop->name,
                                .uuid = cuda::DeviceUuidString(prop->uuid),
                                .memory_bytes = static_cast<int64_t>(prop->totalGlobalMem)};
  // Whatever the kernels of this build serve.
  description.score_types.clear();
  for (ScoreType type : kAllScoreTypes) {
    if (CheckCudaScoreType(type).ok()) description.score_types.push_back(type);
  }
  return std::unique_ptr<Device>(std::make_unique<CudaDevice>(
      ordinal, use_graphs, std::move(copy_pool), staging_stores, std::move(description)));
}

#endif  // TOPK_HAVE_CUDA

}  // namespace topk::server
