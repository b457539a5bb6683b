// The CUDA kinds of region, opened on the GPU the client names (by UUID
// first: ordinals depend on each process's CUDA_VISIBLE_DEVICES). A region
// of device memory reads itself out to the host (CopyOut) through the
// transport thread's own stream.
#include "server/regions/cuda_ipc_region.h"

#include "absl/strings/str_cat.h"

#if TOPK_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>
#include <utility>

#include "spdlog/spdlog.h"
#include "topk/cuda/device_uuid.h"
#include "topk/cuda/resources.h"
#include "topk/cuda/status.h"
#endif

namespace topk::server {
namespace {

// Every CUDA IPC handle (memory or event) is 64 opaque bytes.
absl::Status CheckHandleBytes(absl::string_view handle, absl::string_view field,
                              absl::string_view type) {
  if (handle.size() == kCudaIpcHandleBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", handle.size(), " bytes, a ", type, " has ", kCudaIpcHandleBytes));
}

// A server selecting on the CPU has no GPU to open device memory on.
absl::Status CheckServesGpus(absl::Span<const int> served, absl::string_view field) {
  if (served.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".device: this server selects on the CPU and serves no GPU (wrong device)"));
  }
  return absl::OkStatus();
}

}  // namespace

#if !TOPK_HAVE_CUDA

absl::StatusOr<std::unique_ptr<Region>> OpenCudaIpcRegion(absl::string_view handle,
                                                          uint64_t /*offset*/,
                                                          uint64_t /*byte_size*/,
                                                          const GpuName& /*device*/,
                                                          absl::Span<const int> served) {
  if (absl::Status s = CheckHandleBytes(handle, "cuda_ipc.ipc_handle", "cudaIpcMemHandle_t");
      !s.ok())
    return s;
  if (absl::Status s = CheckServesGpus(served, "cuda_ipc"); !s.ok()) return s;
  return absl::UnimplementedError("cuda_ipc: the server was built without CUDA");
}

absl::StatusOr<std::unique_ptr<Region>> OpenCudaIpcEvent(absl::string_view handle,
                                                         const GpuName& /*device*/,
                                                         absl::Span<const int> served) {
  if (absl::Status s =
          CheckHandleBytes(handle, "cuda_event.ipc_event_handle", "cudaIpcEventHandle_t");
      !s.ok())
    return s;
  if (absl::Status s = CheckServesGpus(served, "cuda_event"); !s.ok()) return s;
  return absl::UnimplementedError("cuda_event: the server was built without CUDA");
}

#else  // TOPK_HAVE_CUDA

namespace {

static_assert(sizeof(cudaIpcMemHandle_t) == kCudaIpcHandleBytes);
static_assert(sizeof(cudaIpcEventHandle_t) == kCudaIpcHandleBytes);

// The server's ordinal of the GPU the client named, among those it serves.
absl::StatusOr<int> ResolveDevice(const GpuName& device, absl::Span<const int> served,
                                  absl::string_view field) {
  if (!device.uuid.empty()) {
    for (int ordinal : served) {
      cudaDeviceProp prop{};
      TOPK_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, ordinal));
      if (cuda::DeviceUuidString(prop.uuid) == device.uuid) return ordinal;
    }
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".device.uuid: ", device.uuid, " is not a GPU this server serves"));
  }
  if (std::find(served.begin(), served.end(), device.ordinal) == served.end()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".device.ordinal: ", device.ordinal,
                                                   " is not a GPU this server serves"));
  }
  return device.ordinal;
}

// Bytes from `pointer` to the end of the allocation holding it, by the
// driver's address-range query. Fetched through the runtime, so the server
// needs no link-time dependency on libcuda.
absl::StatusOr<uint64_t> AllocationBytesFrom(void* pointer) {
  using GetAddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  static GetAddressRange query = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &function, 12000,
                                         cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return static_cast<GetAddressRange>(nullptr);
    }
    return reinterpret_cast<GetAddressRange>(function);
  }();
  if (query == nullptr) {
    return absl::InternalError("cuda_ipc: the driver has no cuMemGetAddressRange");
  }
  CUdeviceptr base = 0;
  size_t bytes = 0;
  const auto address = reinterpret_cast<CUdeviceptr>(pointer);
  if (CUresult r = query(&base, &bytes, address); r != CUDA_SUCCESS) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda_ipc: cuMemGetAddressRange failed (CUresult ", static_cast<int>(r), ")"));
  }
  return static_cast<uint64_t>(base) + bytes - static_cast<uint64_t>(address);
}

// Restores the calling thread's current device on scope exit (gRPC threads
// are shared; the workers set their own device before every request).
class ScopedDevice {
 public:
  ScopedDevice() { cudaGetDevice(&previous_); }
  ~ScopedDevice() { cudaSetDevice(previous_); }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_ = 0;
};

// How one transport thread reads a client's device memory (a request's row
// offsets, before it is queued): on a non-blocking stream of its own per GPU
// into a pinned bounce buffer. A plain cudaMemcpy would put every transport
// thread's read on the GPU's one legacy default stream, executed in issue
// order, and through the driver's staging copy for a pageable destination:
// concurrent requests would wait for each other's reads (and for anything
// else on that stream) before they reach the queue.
class DeviceReader {
 public:
  absl::Status Read(int ordinal, const std::byte* source, size_t bytes, void* dest) {
    absl::StatusOr<Lane*> lane = LaneFor(ordinal);
    if (!lane.ok()) return lane.status();
    auto* out = static_cast<std::byte*>(dest);
    for (size_t done = 0; done < bytes;) {
      const size_t n = std::min(bytes - done, kBounceBytes);
      TOPK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync((*lane)->bounce.get(), source + done, n,
                                                cudaMemcpyDeviceToHost, (*lane)->stream.get()));
      TOPK_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize((*lane)->stream.get()));
      std::memcpy(out + done, (*lane)->bounce.get(), n);
      done += n;
    }
    return absl::OkStatus();
  }

 private:
  // Row offsets of 8K rows per copy; longer reads take several.
  static constexpr size_t kBounceBytes = size_t{64} << 10;
  struct Lane {
    int ordinal = -1;
    cuda::Stream stream;
    cuda::PinnedBuffer<std::byte> bounce;
  };

  // The calling thread's current device is `ordinal` here.
  absl::StatusOr<Lane*> LaneFor(int ordinal) {
    for (Lane& lane : lanes_) {
      if (lane.ordinal == ordinal) return &lane;
    }
    absl::StatusOr<cuda::Stream> stream = cuda::CreateStream();
    if (!stream.ok()) return stream.status();
    absl::StatusOr<cuda::PinnedBuffer<std::byte>> bounce =
        cuda::AllocatePinned<std::byte>(kBounceBytes);
    if (!bounce.ok()) return bounce.status();
    lanes_.push_back(
        Lane{.ordinal = ordinal, .stream = *std::move(stream), .bounce = *std::move(bounce)});
    return &lanes_.back();
  }

  std::deque<Lane> lanes_;  // stable addresses; one per GPU this thread read from
};

// An opened cudaIpcMemHandle_t; closed on destruction on its own device.
class CudaIpcRegion final : public Region {
 public:
  CudaIpcRegion(void* base, std::byte* usable, uint64_t byte_size, int ordinal)
      : Region(RegionKind::kCudaIpc, usable, byte_size, ordinal), base_(base) {}
  ~CudaIpcRegion() override {
    int previous = 0;
    cudaGetDevice(&previous);
    cudaSetDevice(device_ordinal());
    if (cudaError_t e = cudaIpcCloseMemHandle(base_); e != cudaSuccess) {
      spdlog::warn("cudaIpcCloseMemHandle: {}", cudaGetErrorString(e));
    }
    cudaSetDevice(previous);
  }

  absl::Status CopyOut(uint64_t offset, size_t bytes, void* dest) const override {
    if (bytes == 0) return absl::OkStatus();
    const ScopedDevice restore;
    TOPK_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_ordinal()));
    thread_local DeviceReader reader;
    return reader.Read(device_ordinal(), data() + offset, bytes, dest);
  }

 private:
  void* base_;
};

class CudaIpcEventRegion final : public Region {
 public:
  CudaIpcEventRegion(cuda::Event event, int ordinal)
      : Region(RegionKind::kCudaEvent, nullptr, 0, ordinal), event_(std::move(event)) {}
  void* cuda_event() const override { return event_.get(); }

 private:
  cuda::Event event_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Region>> OpenCudaIpcRegion(absl::string_view handle, uint64_t offset,
                                                          uint64_t byte_size, const GpuName& device,
                                                          absl::Span<const int> served) {
  if (absl::Status s = CheckHandleBytes(handle, "cuda_ipc.ipc_handle", "cudaIpcMemHandle_t");
      !s.ok())
    return s;
  if (absl::Status s = CheckServesGpus(served, "cuda_ipc"); !s.ok()) return s;
  if (byte_size == 0) return absl::InvalidArgumentError("cuda_ipc.byte_size: must be > 0");
  if (offset > std::numeric_limits<uint64_t>::max() - byte_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda_ipc: offset ", offset, " + byte_size ", byte_size, " overflows"));
  }
  absl::StatusOr<int> ordinal = ResolveDevice(device, served, "cuda_ipc");
  if (!ordinal.ok()) return ordinal.status();
  const ScopedDevice restore;
  TOPK_CUDA_RETURN_IF_ERROR(cudaSetDevice(*ordinal));
  cudaIpcMemHandle_t ipc{};
  std::memcpy(&ipc, handle.data(), sizeof(ipc));
  void* base = nullptr;
  if (cudaError_t e = cudaIpcOpenMemHandle(&base, ipc, cudaIpcMemLazyEnablePeerAccess);
      e != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it for the next call on this thread
    return absl::InvalidArgumentError(
        absl::StrCat("cuda_ipc.ipc_handle: cudaIpcOpenMemHandle on device ", *ordinal, ": ",
                     cudaGetErrorString(e), " (", cudaGetErrorName(e), ")"));
  }
  // Owned from here on: every early return below closes the handle.
  auto region = std::make_unique<CudaIpcRegion>(base, static_cast<std::byte*>(base) + offset,
                                                byte_size, *ordinal);
  // The real extent of what the handle opened: never trust the client's size.
  absl::StatusOr<uint64_t> extent = AllocationBytesFrom(base);
  if (!extent.ok()) return extent.status();
  if (offset + byte_size > *extent) {
    return absl::InvalidArgumentError(absl::StrCat("cuda_ipc: offset ", offset, " + byte_size ",
                                                   byte_size, " exceeds the allocation's ", *extent,
                                                   " bytes"));
  }
  return std::unique_ptr<Region>(std::move(region));
}

absl::StatusOr<std::unique_ptr<Region>> OpenCudaIpcEvent(absl::string_view handle,
                                                         const GpuName& device,
                                                         absl::Span<const int> served) {
  if (absl::Status s =
          CheckHandleBytes(handle, "cuda_event.ipc_event_handle", "cudaIpcEventHandle_t");
      !s.ok())
    return s;
  if (absl::Status s = CheckServesGpus(served, "cuda_event"); !s.ok()) return s;
  absl::StatusOr<int> ordinal = ResolveDevice(device, served, "cuda_event");
  if (!ordinal.ok()) return ordinal.status();
  const ScopedDevice restore;
  TOPK_CUDA_RETURN_IF_ERROR(cudaSetDevice(*ordinal));
  cudaIpcEventHandle_t ipc{};
  std::memcpy(&ipc, handle.data(), sizeof(ipc));
  cudaEvent_t event = nullptr;
  if (cudaError_t e = cudaIpcOpenEventHandle(&event, ipc); e != cudaSuccess) {
    cudaGetLastError();
    return absl::InvalidArgumentError(
        absl::StrCat("cuda_event.ipc_event_handle: cudaIpcOpenEventHandle on device ", *ordinal,
                     ": ", cudaGetErrorString(e), " (", cudaGetErrorName(e), ")"));
  }
  return std::unique_ptr<Region>(
      std::make_unique<CudaIpcEventRegion>(cuda::Event(event), *ordinal));
}

#endif  // TOPK_HAVE_CUDA

}  // namespace topk::server
