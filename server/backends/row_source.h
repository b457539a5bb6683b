// Where a request's score bytes are, and the one place that decides how a
// backend gets them into the memory it reads.
//
// A request's rows are bytes(dtype) * sum(lengths) bytes of packed
// little-endian valid prefixes of its score type (4 bytes an element for
// FP32, 2 for BF16 and FP16). The transport wraps whatever holds them (gRPC's
// receive buffer, a stream's accumulated chunks, a client's region) in a
// RowSource and never copies them itself. A backend reads them through
// StageOnHost: in place when the source already holds them as contiguous,
// aligned host floats, otherwise with exactly one copy into the backend's own
// staging (pageable on the CPU, pinned on the GPU, where the upload needs it).
// A source that lives on a GPU (a CUDA IPC region) hands the CUDA backend its
// device pointer instead, and is read where it is, without staging.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "server/backends/copy_bytes.h"

namespace topk::server {

class RowSource {
 public:
  virtual ~RowSource() = default;

  // The score bytes: bytes(dtype) * sum(lengths) once the transport
  // validated them.
  virtual size_t size_bytes() const = 0;

  // Copies bytes [offset, offset + bytes) to `dest`, which holds at least
  // `bytes`, with `stores` (copy_bytes.h). Safe to call from any thread while
  // the source is alive.
  virtual void CopyRange(size_t offset, size_t bytes, std::byte* dest, CopyStores stores) const = 0;

  // The floats in place, when they already are contiguous, 4-byte aligned
  // host memory that lives as long as the source; nullptr otherwise.
  virtual const float* InPlaceHostFloats() const { return nullptr; }

  // The CUDA ordinal of the GPU holding the floats; -1 for host memory.
  virtual int32_t device_ordinal() const { return -1; }
  // The floats on that GPU (device_ordinal() >= 0), else nullptr.
  virtual const float* InPlaceDeviceFloats() const { return nullptr; }
};

// Rows already in one host buffer (a stream's chunks, a test's vector). The
// buffer must outlive the source.
class ContiguousRows final : public RowSource {
 public:
  explicit ContiguousRows(absl::string_view bytes) : bytes_(bytes) {}

  size_t size_bytes() const override { return bytes_.size(); }
  void CopyRange(size_t offset, size_t bytes, std::byte* dest, CopyStores stores) const override;
  // Null when the buffer is misaligned: the selectors need aligned floats.
  const float* InPlaceHostFloats() const override;

 private:
  absl::string_view bytes_;
};

// Rows in a client's region, read where they are: host memory (shared
// memory) or a GPU's (CUDA IPC). The transport checked that [data, data +
// bytes) lies in the region and is 4-byte aligned; a lease on the region
// keeps it mapped while the request runs.
class RegionRows final : public RowSource {
 public:
  RegionRows(const std::byte* data, size_t bytes, int32_t device_ordinal)
      : data_(data), bytes_(bytes), device_ordinal_(device_ordinal) {}

  size_t size_bytes() const override { return bytes_; }
  // Host regions only: a GPU region is read on its device, never staged
  // (the engine runs its requests on that device's CUDA workers).
  void CopyRange(size_t offset, size_t bytes, std::byte* dest, CopyStores stores) const override;
  const float* InPlaceHostFloats() const override;
  int32_t device_ordinal() const override { return device_ordinal_; }
  const float* InPlaceDeviceFloats() const override;

 private:
  const std::byte* data_;
  size_t bytes_;
  int32_t device_ordinal_;
};

enum class Staging {
  // Host readers (the CPU selector) read the source's floats where they are.
  kInPlaceWhenPossible,
  // Readers of their own memory only (the GPU's pinned upload buffers).
  kAlwaysCopy,
};

// The request's floats in host memory: the source's own when `staging_mode`
// allows and the source has them in place, else copied once into `staging`
// (which holds at least rows.size_bytes()).
const float* StageOnHost(const RowSource& rows, Staging staging_mode, std::byte* staging);

}  // namespace topk::server
