// RAII owners for every CUDA runtime handle host code holds: device and pinned
// memory, streams, events, graphs and executable graphs. Each owner is a
// move-only std::unique_ptr with a deleter that calls the matching destroy
// function, and each has a factory that returns absl::StatusOr so a failed
// allocation is a status, never a null owner.
//
// Destruction order is the owner's declaration order reversed; a class that
// owns a graph and the buffers it reads declares the buffers first.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <type_traits>

#include "absl/status/statusor.h"
#include "topk/cuda/status.h"

namespace topk::cuda {

namespace internal {
struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct PinnedFree {
  void operator()(void* p) const { cudaFreeHost(p); }
};
struct StreamDestroy {
  void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
};
struct EventDestroy {
  void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
};
struct GraphDestroy {
  void operator()(cudaGraph_t g) const { cudaGraphDestroy(g); }
};
struct GraphExecDestroy {
  void operator()(cudaGraphExec_t g) const { cudaGraphExecDestroy(g); }
};
}  // namespace internal

// Typed memory: `count` elements of T, plus its size, in one owner.
template <typename T, typename Free>
class Memory {
 public:
  Memory() = default;
  Memory(T* ptr, size_t count) : ptr_(ptr), count_(count) {}
  T* get() const { return static_cast<T*>(ptr_.get()); }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  std::unique_ptr<void, Free> ptr_;
  size_t count_ = 0;
};

template <typename T>
using DeviceBuffer = Memory<T, internal::DeviceFree>;
template <typename T>
using PinnedBuffer = Memory<T, internal::PinnedFree>;

using Stream = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, internal::StreamDestroy>;
using Event = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, internal::EventDestroy>;
using Graph = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, internal::GraphDestroy>;
using GraphExec =
    std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, internal::GraphExecDestroy>;

// cudaMalloc of `count` elements; a zero count allocates nothing.
template <typename T>
absl::StatusOr<DeviceBuffer<T>> AllocateDevice(size_t count) {
  void* p = nullptr;
  if (count > 0) TOPK_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, count * sizeof(T)));
  return DeviceBuffer<T>(static_cast<T*>(p), count);
}

// cudaMallocHost (page-locked) of `count` elements: the staging memory that
// makes cudaMemcpyAsync a true asynchronous DMA.
template <typename T>
absl::StatusOr<PinnedBuffer<T>> AllocatePinned(size_t count) {
  void* p = nullptr;
  if (count > 0) TOPK_CUDA_RETURN_IF_ERROR(cudaMallocHost(&p, count * sizeof(T)));
  return PinnedBuffer<T>(static_cast<T*>(p), count);
}

// A non-blocking stream: it never synchronises with the legacy default stream.
inline absl::StatusOr<Stream> CreateStream() {
  cudaStream_t s = nullptr;
  TOPK_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(s);
}

inline absl::StatusOr<Event> CreateEvent(unsigned flags = cudaEventDefault) {
  cudaEvent_t e = nullptr;
  TOPK_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, flags));
  return Event(e);
}

// Instantiates a captured graph into its executable form.
inline absl::StatusOr<GraphExec> Instantiate(cudaGraph_t graph) {
  cudaGraphExec_t exec = nullptr;
  TOPK_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&exec, graph, 0));
  return GraphExec(exec);
}

}  // namespace topk::cuda
