// Where a request's score bytes are, and the one place that decides how a
// backend gets them into the memory it reads.
//
// A request's rows are 4 * sum(lengths) bytes of packed little-endian FP32
// valid prefixes. The transport wraps whatever holds them (gRPC's receive
// buffer, a stream's accumulated chunks; later a shared-memory region) in a
// RowSource and never copies them itself. A backend reads them through
// StageOnHost: in place when the source already holds them as contiguous,
// aligned host floats, otherwise with exactly one copy into the backend's own
// staging (pageable on the CPU, pinned on the GPU, where the upload needs it).
// A source that lives on a device (CUDA IPC) will add its device pointer here
// for the CUDA backend to read without staging.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace topk::server {

class RowSource {
 public:
  virtual ~RowSource() = default;

  // The score bytes: 4 * sum(lengths) once the transport validated them.
  virtual size_t size_bytes() const = 0;

  // Copies bytes [offset, offset + bytes) to `dest`, which holds at least
  // `bytes`. Safe to call from any thread while the source is alive.
  virtual void CopyRange(size_t offset, size_t bytes, std::byte* dest) const = 0;

  // The floats in place, when they already are contiguous, 4-byte aligned
  // host memory that lives as long as the source; nullptr otherwise.
  virtual const float* InPlaceHostFloats() const { return nullptr; }
};

// Rows already in one host buffer (a stream's chunks, a test's vector). The
// buffer must outlive the source.
class ContiguousRows final : public RowSource {
 public:
  explicit ContiguousRows(absl::string_view bytes) : bytes_(bytes) {}

  size_t size_bytes() const override { return bytes_.size(); }
  void CopyRange(size_t offset, size_t bytes, std::byte* dest) const override;
  // Null when the buffer is misaligned: the selectors need aligned floats.
  const float* InPlaceHostFloats() const override;

 private:
  absl::string_view bytes_;
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
