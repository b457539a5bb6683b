// The regions clients registered, by session. A session is what a client
// holds open while it uses regions (the transport ties it to a stream); a
// region is reachable only through the session that registered it, so one
// client can never name another's. Dropping a region from the registry
// (unregister, session end, shutdown) closes it once the last request
// leasing it is done: leases share ownership.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/backends/region.h"

namespace topk::server {

struct RegionListing {
  std::string name;
  RegionKind kind = RegionKind::kShm;
  uint64_t byte_size = 0;
  int32_t device_ordinal = -1;
  int64_t in_flight = 0;
};

struct RegionRegistryLimits {
  // Bounds what one client can make the server hold open.
  int64_t max_sessions = 1024;
  int64_t max_regions_per_session = 256;
};

class RegionRegistry {
 public:
  explicit RegionRegistry(RegionRegistryLimits limits = {}) : limits_(limits) {}

  // A new session with an unguessable id (128 random bits, hex).
  // RESOURCE_EXHAUSTED past max_sessions.
  absl::StatusOr<std::string> OpenSession();
  // Drops the session and every region it holds (no-op when unknown).
  void CloseSession(const std::string& session);

  // NOT_FOUND for an unknown session, ALREADY_EXISTS for a taken name,
  // RESOURCE_EXHAUSTED past max_regions_per_session.
  absl::Status Add(const std::string& session, const std::string& name,
                   std::shared_ptr<Region> region);
  // Drops one region (NOT_FOUND when absent) or, with `all`, every region
  // of the session. Returns how many were dropped.
  absl::StatusOr<int> Remove(const std::string& session, const std::string& name, bool all);
  // A lease on a region: NOT_FOUND for an unknown session or name.
  absl::StatusOr<RegionLease> Lease(const std::string& session, const std::string& name) const;
  // The session's regions in name order.
  absl::StatusOr<std::vector<RegionListing>> List(const std::string& session) const;

  // Drops every session (shutdown).
  void Clear();
  int64_t session_count() const;

 private:
  using Regions = absl::flat_hash_map<std::string, std::shared_ptr<Region>>;
  RegionRegistryLimits limits_;
  mutable absl::Mutex mutex_;
  absl::flat_hash_map<std::string, Regions> sessions_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace topk::server
