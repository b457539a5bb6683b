// Shared-memory regions: a window of a POSIX shared-memory object, mapped
// read-write once its registering session proved it may write the object
// (docs/regions.md, "Trust model"), and guarded against the owner shrinking
// it (shm_guard.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/regions/region.h"

namespace topk::server {

// The proof that whoever registers a shared-memory object can write it
// (docs/regions.md, "Trust model"): kShmProofBytes that the object holds,
// when the server opens it, at ShmProofOffset. Only a process that can open
// the object read-write can put them there, so the server, which may open
// objects its client cannot, is never the client's deputy.
inline constexpr uint64_t kShmProofBytes = 16;

// Where the proof lies: at `offset` when kShmProofBytes fit there, else in
// the object's last kShmProofBytes; -1 when the object is smaller.
int64_t ShmProofOffset(uint64_t offset, uint64_t object_bytes);

// The ownership proof a session's shared-memory registrations must hold
// (OpenShmRegion): the first kShmProofBytes of SHA-256("topk-shm-ownership" +
// '\0' + session id). One-way, so a process that reads it out of an object
// learns nothing of the session id (which is the session's capability).
std::string ShmOwnershipProof(absl::string_view session_id);

// Maps [offset, offset + byte_size) of the shared-memory object `shm_name`
// read-write, once the object holds `ownership_proof` (kShmProofBytes) at
// ShmProofOffset: PERMISSION_DENIED, naming where, when it does not.
// INVALID_ARGUMENT, with the OS's error text, when the object cannot be
// opened or mapped, or is smaller than offset + byte_size.
absl::StatusOr<std::unique_ptr<Region>> OpenShmRegion(const std::string& shm_name, uint64_t offset,
                                                      uint64_t byte_size,
                                                      absl::string_view ownership_proof);

}  // namespace topk::server
