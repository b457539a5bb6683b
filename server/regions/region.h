// Memory a client shares with the server, as every kind of region looks to
// its users: a POSIX shared-memory object (shm_region.h) or a CUDA
// allocation (cuda_ipc_region.h), opened once when the client registers it
// and closed when the last user lets go; and CUDA interprocess events for
// GPU-side ordering. Each kind is an RAII object: destroying it unmaps or
// closes what opening it mapped or opened.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace topk::server {

enum class RegionKind { kShm, kCudaIpc, kCudaEvent };

// Which memory a region's bytes are, so that two regions over the same
// memory compare as such: two registrations of one shared-memory object are
// two mappings at different addresses of the same bytes. Bytes `a` of one
// region and `b` of another are the same byte exactly when their `object`s
// are equal and start + a == start + b.
struct MemoryPlace {
  // A shared-memory object: its (st_dev, st_ino). Device or process memory:
  // {kAddressSpace, the device ordinal + 1 (0: the host)}.
  uint64_t object[2] = {0, 0};
  // The region's byte 0 within `object` (the object's file offset, or the
  // address).
  uint64_t start = 0;

  static constexpr uint64_t kAddressSpace = ~uint64_t{0};
  bool SameObject(const MemoryPlace& other) const {
    return object[0] == other.object[0] && object[1] == other.object[1];
  }
};

// "shm", "cuda_ipc", "cuda_event" (the names ListRegions reports).
absl::string_view RegionKindName(RegionKind kind);

class Region {
 public:
  virtual ~Region() = default;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  RegionKind kind() const { return kind_; }
  // The usable range's length in bytes (0 for an event).
  uint64_t byte_size() const { return byte_size_; }
  // The server's CUDA ordinal of the memory's GPU; -1 for host memory.
  int32_t device_ordinal() const { return device_ordinal_; }
  // The usable range's first byte: host memory for kShm, device memory for
  // kCudaIpc, null for an event.
  std::byte* data() const { return data_; }
  // The cudaEvent_t of a kCudaEvent region (null otherwise), untyped so that
  // this header needs no CUDA.
  virtual void* cuda_event() const { return nullptr; }
  // Where the bytes are (see MemoryPlace). By default an address on the
  // region's device: a CUDA allocation is mapped once per process, so two
  // regions of it share addresses.
  virtual MemoryPlace place() const {
    return MemoryPlace{
        .object = {MemoryPlace::kAddressSpace, static_cast<uint64_t>(int64_t{device_ordinal_} + 1)},
        .start = reinterpret_cast<uintptr_t>(data_)};
  }

  // Whether the memory is still all there. A shared-memory object can be
  // shrunk by its owner after registration, and reading past its new end
  // would fault: requests check this before they are queued.
  virtual absl::Status CheckIntact() const { return absl::OkStatus(); }
  // True once an access to the memory faulted (a shared-memory object
  // shrunk under the server: see shm_guard.h). What was read from it since
  // may be zeros, and what was written is lost.
  virtual bool poisoned() const { return false; }

  // Copies [offset, offset + bytes) to host memory; the caller checked the
  // range. Each kind copies its own way (a GPU's memory through the device),
  // so that this base knows none of them. An event holds no bytes.
  virtual absl::Status CopyOut(uint64_t offset, size_t bytes, void* dest) const;

  // Requests that hold the region right now (RegionLease).
  int64_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

 protected:
  Region(RegionKind kind, std::byte* data, uint64_t byte_size, int32_t device_ordinal)
      : kind_(kind), data_(data), byte_size_(byte_size), device_ordinal_(device_ordinal) {}

 private:
  friend class RegionLease;
  RegionKind kind_;
  std::byte* data_;
  uint64_t byte_size_;
  int32_t device_ordinal_;
  std::atomic<int64_t> in_flight_{0};
};

// A request's hold on a region: keeps it open (and counted in in_flight())
// until the request is done, even when the client unregisters it meanwhile.
class RegionLease {
 public:
  RegionLease() = default;
  explicit RegionLease(std::shared_ptr<Region> region) : region_(std::move(region)) {
    if (region_) region_->in_flight_.fetch_add(1, std::memory_order_relaxed);
  }
  ~RegionLease() { Release(); }
  RegionLease(RegionLease&& other) noexcept : region_(std::move(other.region_)) {}
  RegionLease& operator=(RegionLease&& other) noexcept {
    if (this != &other) {
      Release();
      region_ = std::move(other.region_);
    }
    return *this;
  }
  RegionLease(const RegionLease&) = delete;
  RegionLease& operator=(const RegionLease&) = delete;

  const Region* get() const { return region_.get(); }
  const Region* operator->() const { return region_.get(); }

 private:
  void Release() {
    if (region_) region_->in_flight_.fetch_sub(1, std::memory_order_relaxed);
    region_.reset();
  }
  std::shared_ptr<Region> region_;
};

// Copies [offset, offset + bytes) of a memory region (shared memory or a
// GPU's) to host memory: for the small per-request arrays the server must
// check on the host (row offsets). The caller checked the range.
inline absl::Status CopyFromRegion(const Region& region, uint64_t offset, size_t bytes,
                                   void* dest) {
  return region.CopyOut(offset, bytes, dest);
}

}  // namespace topk::server
