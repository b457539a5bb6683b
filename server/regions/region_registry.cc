#include "server/regions/region_registry.h"

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

absl::Status UnknownSession(absl::string_view session) {
  return absl::NotFoundError(
      absl::StrCat("session_id: no open session '", session, "' (OpenSession first)"));
}

}  // namespace

absl::StatusOr<RegionLease> SessionRegions::Lease(absl::string_view name) const {
  absl::ReaderMutexLock lock(&mutex_);
  if (closed_) return absl::NotFoundError("the session has ended");
  auto region = regions_.find(name);
  if (region == regions_.end()) {
    return absl::NotFoundError(absl::StrCat("the session has no region named '", name, "'"));
  }
  return RegionLease(region->second);
}

RegionRegistry::Regions RegionRegistry::Close(SessionRegions& session) {
  absl::MutexLock lock(&session.mutex_);
  session.closed_ = true;
  session.closed_flag_.store(true, std::memory_order_release);
  return std::exchange(session.regions_, Regions());
}

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
  sessions_.emplace(id, std::make_shared<SessionRegions>());
  return id;
}

void RegionRegistry::CloseSession(const std::string& session) {
  std::shared_ptr<SessionRegions> closing;
  {
    absl::MutexLock lock(&mutex_);
    if (auto it = sessions_.find(session); it != sessions_.end()) {
      closing = std::move(it->second);
      sessions_.erase(it);
    }
  }
  // The regions close here, outside every lock (or later, with the last
  // request leasing them).
  if (closing != nullptr) Close(*closing);
}

absl::StatusOr<std::shared_ptr<SessionRegions>> RegionRegistry::FindSession(
    absl::string_view session) const {
  absl::ReaderMutexLock lock(&mutex_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return UnknownSession(session);
  return it->second;
}

absl::StatusOr<std::shared_ptr<const SessionRegions>> RegionRegistry::Find(
    absl::string_view session) const {
  absl::StatusOr<std::shared_ptr<SessionRegions>> found = FindSession(session);
  if (!found.ok()) return found.status();
  return std::shared_ptr<const SessionRegions>(*std::move(found));
}

absl::Status RegionRegistry::Add(const std::string& session, const std::string& name,
                                 std::shared_ptr<Region> region) {
  absl::StatusOr<std::shared_ptr<SessionRegions>> found = FindSession(session);
  if (!found.ok()) return found.status();
  SessionRegions& regions = **found;
  absl::MutexLock lock(&regions.mutex_);
  if (regions.closed_) return UnknownSession(session);
  if (regions.regions_.contains(name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("name: the session already has a region named '", name, "'"));
  }
  if (static_cast<int64_t>(regions.regions_.size()) >= limits_.max_regions_per_session) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the session already holds ", limits_.max_regions_per_session, " regions"));
  }
  regions.regions_.emplace(name, std::move(region));
  return absl::OkStatus();
}

absl::StatusOr<int> RegionRegistry::Remove(const std::string& session, const std::string& name,
                                           bool all) {
  absl::StatusOr<std::shared_ptr<SessionRegions>> found = FindSession(session);
  if (!found.ok()) return found.status();
  SessionRegions& regions = **found;
  Regions dropped;  // closed after the lock is released
  absl::MutexLock lock(&regions.mutex_);
  if (regions.closed_) return UnknownSession(session);
  if (all) {
    dropped.swap(regions.regions_);
    return static_cast<int>(dropped.size());
  }
  auto region = regions.regions_.find(name);
  if (region == regions.regions_.end()) {
    return absl::NotFoundError(absl::StrCat("name: the session has no region named '", name, "'"));
  }
  dropped.emplace(name, std::move(region->second));
  regions.regions_.erase(region);
  return 1;
}

absl::StatusOr<RegionLease> RegionRegistry::Lease(absl::string_view session,
                                                  absl::string_view name) const {
  absl::StatusOr<std::shared_ptr<const SessionRegions>> found = Find(session);
  if (!found.ok()) return found.status();
  return (*found)->Lease(name);
}

absl::StatusOr<std::vector<RegionListing>> RegionRegistry::List(const std::string& session) const {
  absl::StatusOr<std::shared_ptr<const SessionRegions>> found = Find(session);
  if (!found.ok()) return found.status();
  const SessionRegions& regions = **found;
  std::vector<RegionListing> out;
  {
    absl::ReaderMutexLock lock(&regions.mutex_);
    if (regions.closed_) return UnknownSession(session);
    for (const auto& [name, region] : regions.regions_) {
      out.push_back({.name = name,
                     .kind = region->kind(),
                     .byte_size = region->byte_size(),
                     .device_ordinal = region->device_ordinal(),
                     .in_flight = region->in_flight()});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const RegionListing& a, const RegionListing& b) { return a.name < b.name; });
  return out;
}

void RegionRegistry::Clear() {
  absl::flat_hash_map<std::string, std::shared_ptr<SessionRegions>> closing;
  {
    absl::MutexLock lock(&mutex_);
    closing.swap(sessions_);
  }
  for (auto& [id, session] : closing) Close(*session);
}

int64_t RegionRegistry::session_count() const {
  absl::ReaderMutexLock lock(&mutex_);
  return static_cast<int64_t>(sessions_.size());
}

}  // namespace topk::server
