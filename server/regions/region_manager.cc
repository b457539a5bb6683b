#include "server/regions/region_manager.h"

#include <memory>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "server/regions/shm_region.h"
#include "spdlog/spdlog.h"

namespace topk::server {
namespace {

constexpr size_t kMaxRegionNameBytes = 128;

absl::Status CheckRegionName(const std::string& name) {
  if (name.empty() || name.size() > kMaxRegionNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("name: ", name.size(), " bytes, must be 1 to ", kMaxRegionNameBytes));
  }
  for (char c : name) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError("name: only printable ASCII without spaces");
    }
  }
  return absl::OkStatus();
}

}  // namespace

RegionManager::RegionManager(RegionManagerConfig config)
    : config_(std::move(config)), registry_(config_.registry) {}

RegionManager::~RegionManager() { CloseAllSessions(); }

absl::StatusOr<std::string> RegionManager::OpenSession() { return registry_.OpenSession(); }

void RegionManager::CloseSession(const std::string& id) { registry_.CloseSession(id); }

void RegionManager::CloseAllSessions() { registry_.Clear(); }

absl::StatusOr<RegisteredRegion> RegionManager::Register(const std::string& session,
                                                         const std::string& name,
                                                         const RegionSpec& spec) {
  if (absl::Status s = CheckRegionName(name); !s.ok()) return s;
  // Refuse an unknown session before opening anything.
  if (absl::StatusOr<std::vector<RegionListing>> known = registry_.List(session); !known.ok()) {
    return known.status();
  }
  absl::StatusOr<std::unique_ptr<Region>> region;
  if (const auto* shm = std::get_if<ShmRegionSpec>(&spec)) {
    region = OpenShmRegion(shm->shm_name, shm->offset, shm->byte_size, ShmOwnershipProof(session));
  } else if (const auto* ipc = std::get_if<CudaIpcRegionSpec>(&spec)) {
    region = OpenCudaIpcRegion(ipc->ipc_handle, ipc->offset, ipc->byte_size, ipc->device,
                               config_.served_gpus);
  } else if (const auto* event = std::get_if<CudaEventSpec>(&spec)) {
    region = OpenCudaIpcEvent(event->ipc_event_handle, event->device, config_.served_gpus);
  } else {
    return absl::InvalidArgumentError("kind: set one of shm, cuda_ipc, cuda_event");
  }
  if (!region.ok()) return region.status();
  const RegisteredRegion opened{.byte_size = (*region)->byte_size(),
                                .device_ordinal = (*region)->device_ordinal()};
  if (absl::Status s = registry_.Add(session, name, *std::move(region)); !s.ok()) return s;
  spdlog::debug("region '{}' registered ({} bytes, device {})", name, opened.byte_size,
                opened.device_ordinal);
  return opened;
}

absl::StatusOr<int> RegionManager::Unregister(const std::string& session, const std::string& name,
                                              bool all) {
  return registry_.Remove(session, name, all);
}

absl::StatusOr<std::vector<RegionListing>> RegionManager::List(const std::string& session) const {
  return registry_.List(session);
}

absl::StatusOr<BoundSelect> RegionManager::BindSelect(const SelectReferences& refs,
                                                      RegionBinding& binding,
                                                      SessionCache* cache) const {
  // The session once per request (or once per stream, from its cache); its
  // regions under its own reader lock.
  std::shared_ptr<const SessionRegions> session;
  if (cache != nullptr && cache->regions != nullptr && !cache->regions->closed() &&
      cache->id == refs.session_id) {
    session = cache->regions;
  } else {
    absl::StatusOr<std::shared_ptr<const SessionRegions>> found = registry_.Find(refs.session_id);
    if (!found.ok()) return found.status();
    session = *std::move(found);
    if (cache != nullptr)
      *cache = SessionCache{.id = std::string(refs.session_id), .regions = session};
  }
  return BindReferences(*session, refs, config_.binding, binding);
}

absl::StatusOr<ChannelLeases> RegionManager::LeaseForChannel(
    const std::string& session, absl::Span<const absl::string_view> names, bool gpu_backend) const {
  ChannelLeases out;
  absl::flat_hash_set<absl::string_view> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    const absl::string_view name = names[i];
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("regions[", i, "]: '", name, "' is named twice"));
    }
    absl::StatusOr<RegionLease> lease = registry_.Lease(session, name);
    if (!lease.ok()) return lease.status();
    const Region& region = *lease->get();
    const RegionKind want = gpu_backend ? RegionKind::kCudaIpc : RegionKind::kShm;
    if (region.kind() != want) {
      return absl::InvalidArgumentError(
          absl::StrCat("regions[", i, "]: '", name, "' is ", RegionKindName(region.kind()), "; a ",
                       gpu_backend ? "GPU" : "CPU", " server's channels read ",
                       RegionKindName(want), " regions"));
    }
    if (i == 0) {
      out.device_ordinal = region.device_ordinal();
    } else if (region.device_ordinal() != out.device_ordinal) {
      return absl::InvalidArgumentError(
          absl::StrCat("regions[", i, "]: '", name, "' is on device ", region.device_ordinal(),
                       ", regions[0] on device ", out.device_ordinal));
    }
    out.leases.push_back(*std::move(lease));
  }
  return out;
}

}  // namespace topk::server
