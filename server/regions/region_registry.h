// The regions clients registered, by session. A session is what a client
// holds open while it uses regions (the transport ties it to a stream); a
// region is reachable only through the session that registered it, so one
// client can never name another's. Dropping a region from the registry
// (unregister, session end, shutdown) closes it once the last request
// leasing it is done: leases share ownership.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/regions/region.h"

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

// One session's regions. A request resolves its session once (a reader lock
// on the registry) and leases from it under the session's own reader lock,
// so requests of different sessions never contend and requests of one
// session only share a reader lock. Nothing on that path allocates.
class SessionRegions {
 public:
  // A lease on the region `name`: NOT_FOUND when the session has none, or
  // has ended since the request found it.
  absl::StatusOr<RegionLease> Lease(absl::string_view name) const;
  // True once the session ended (a holder of this object must look the
  // session up again, and will not find it).
  bool closed() const { return closed_flag_.load(std::memory_order_acquire); }

 private:
  friend class RegionRegistry;
  std::atomic<bool> closed_flag_{false};
  using Regions = absl::flat_hash_map<std::string, std::shared_ptr<Region>>;
  mutable absl::Mutex mutex_;
  Regions regions_ ABSL_GUARDED_BY(mutex_);
  bool closed_ ABSL_GUARDED_BY(mutex_) = false;
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
  // The session's regions: NOT_FOUND (naming session_id) when unknown.
  absl::StatusOr<std::shared_ptr<const SessionRegions>> Find(absl::string_view session) const;
  // A lease on a region: NOT_FOUND for an unknown session or name.
  absl::StatusOr<RegionLease> Lease(absl::string_view session, absl::string_view name) const;
  // The session's regions in name order.
  absl::StatusOr<std::vector<RegionListing>> List(const std::string& session) const;

  // Drops every session (shutdown).
  void Clear();
  int64_t session_count() const;

 private:
  using Regions = SessionRegions::Regions;
  // Ends `session`: its regions are handed to the caller (to be dropped
  // outside every lock).
  static Regions Close(SessionRegions& session);
  absl::StatusOr<std::shared_ptr<SessionRegions>> FindSession(absl::string_view session) const;
  RegionRegistryLimits limits_;
  mutable absl::Mutex mutex_;
  absl::flat_hash_map<std::string, std::shared_ptr<SessionRegions>> sessions_
      ABSL_GUARDED_BY(mutex_);
};

}  // namespace topk::server
