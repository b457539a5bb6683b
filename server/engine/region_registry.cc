#include "server/engine/region_registry.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"

namespace topk::server {
namespace {

std::string RandomSessionId() {
  // random_device reads the kernel's CSPRNG on Linux: session ids are
  // capabilities, so they must not be predictable.
  thread_local std::random_device random;
  std::string id;
  static constexpr char kHex[] = "0123456789abcdef";
  for (int word = 0; word < 4; ++word) {
    uint32_t bits = random();
    for (int i = 0; i < 8; ++i, bits >>= 4) id += kHex[bits & 15];
  }
  return id;
}

absl::Status UnknownSession(const std::string& session) {
  return absl::NotFoundError(
      absl::StrCat("session_id: no open session '", session, "' (OpenSession first)"));
}

}  // namespace

absl::StatusOr<std::string> RegionRegistry::OpenSession() {
  absl::MutexLock lock(&mutex_);
  if (static_cast<int64_t>(sessions_.size()) >= limits_.max_sessions) {
    return absl::ResourceExhaustedError(
        absl::StrCat("too many open sessions (", limits_.max_sessions, ")"));
  }
  std::string id;
  do {
    id = RandomSessionId();
  } while (sessions_.contains(id));
  sessions_.emplace(id, Regions());
  return id;
}

void RegionRegistry::CloseSession(const std::string& session) {
  Regions dropped;  // closed after the lock is released
  absl::MutexLock lock(&mutex_);
  if (auto it = sessions_.find(session); it != sessions_.end()) {
    dropped = std::move(it->second);
    sessions_.erase(it);
  }
}

absl::Status RegionRegistry::Add(const std::string& session, const std::string& name,
                                 std::shared_ptr<Region> region) {
  absl::MutexLock lock(&mutex_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return UnknownSession(session);
  if (it->second.contains(name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("name: the session already has a region named '", name, "'"));
  }
  if (static_cast<int64_t>(it->second.size()) >= limits_.max_regions_per_session) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the session already holds ", limits_.max_regions_per_session, " regions"));
  }
  it->second.emplace(name, std::move(region));
  return absl::OkStatus();
}

absl::StatusOr<int> RegionRegistry::Remove(const std::string& session, const std::string& name,
                                           bool all) {
  Regions dropped;  // closed after the lock is released
  absl::MutexLock lock(&mutex_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return UnknownSession(session);
  if (all) {
    dropped.swap(it->second);
    return static_cast<int>(dropped.size());
  }
  auto region = it->second.find(name);
  if (region == it->second.end()) {
    return absl::NotFoundError(absl::StrCat("name: the session has no region named '", name, "'"));
  }
  dropped.emplace(name, std::move(region->second));
  it->second.erase(region);
  return 1;
}

absl::StatusOr<RegionLease> RegionRegistry::Lease(const std::string& session,
                                                  const std::string& name) const {
  absl::MutexLock lock(&mutex_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return UnknownSession(session);
  auto region = it->second.find(name);
  if (region == it->second.end()) {
    return absl::NotFoundError(absl::StrCat("the session has no region named '", name, "'"));
  }
  return RegionLease(region->second);
}

absl::StatusOr<std::vector<RegionListing>> RegionRegistry::List(const std::string& session) const {
  absl::MutexLock lock(&mutex_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return UnknownSession(session);
  std::vector<RegionListing> out;
  for (const auto& [name, region] : it->second) {
    out.push_back({.name = name,
                   .kind = region->kind(),
                   .byte_size = region->byte_size(),
                   .device_ordinal = region->device_ordinal(),
                   .in_flight = region->in_flight()});
  }
  std::sort(out.begin(), out.end(),
            [](const RegionListing& a, const RegionListing& b) { return a.name < b.name; });
  return out;
}

void RegionRegistry::Clear() {
  absl::flat_hash_map<std::string, Regions> dropped;
  absl::MutexLock lock(&mutex_);
  dropped.swap(sessions_);
}

int64_t RegionRegistry::session_count() const {
  absl::MutexLock lock(&mutex_);
  return static_cast<int64_t>(sessions_.size());
}

}  // namespace topk::server
