// Faults in client shared memory. A client can shrink (ftruncate) a
// shared-memory object after the server mapped it; touching the lost pages
// then raises SIGBUS, which would kill the server. As display servers guard
// their clients' shm pools, a process-wide SIGBUS handler (installed at the
// first guard, chaining to the handler before it for any other fault)
// replaces a guarded mapping that faulted with anonymous zero pages
// (MAP_FIXED) and marks it poisoned: the access that faulted completes on
// zeros and the request checks the mark once its reads and writes are done,
// so it fails instead of answering from zeros. Later requests on the region
// are refused. The handler touches nothing but a fixed-size lock-free table
// and one mmap call (a plain system call).
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"

namespace topk::server {

// Mappings guarded at once; past it registering shared memory is refused.
inline constexpr int kMaxGuardedMappings = 8192;

class ShmGuard {
 public:
  // Guards the mapping [base, base + bytes) (`base` page aligned).
  // RESOURCE_EXHAUSTED when kMaxGuardedMappings are guarded already.
  static absl::StatusOr<ShmGuard> Guard(void* base, size_t bytes);

  ShmGuard() = default;  // guards nothing
  ~ShmGuard();           // stops guarding (before the mapping goes)
  ShmGuard(ShmGuard&& other) noexcept;
  ShmGuard& operator=(ShmGuard&& other) noexcept;
  ShmGuard(const ShmGuard&) = delete;
  ShmGuard& operator=(const ShmGuard&) = delete;

  // True once an access to the mapping faulted (it now holds zeros).
  bool poisoned() const;

 private:
  explicit ShmGuard(int slot) : slot_(slot) {}
  void Release();
  int slot_ = -1;
};

}  // namespace topk::server
