// The one interface to the memory clients share with the server
// (docs/regions.md): sessions, the regions registered in them, and the
// leases that requests and channels hold on them. It opens what a client
// registers (with the checks each kind needs), binds a request's
// references with every byte checked, lends regions to channels, and closes
// them when the last holder lets go. The transport decodes the wire into the
// plain requests below and calls this; nothing else opens, checks or lends
// client memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/backends/backend.h"
#include "server/regions/cuda_ipc_region.h"
#include "server/regions/region.h"
#include "server/regions/region_binding.h"
#include "server/regions/region_registry.h"

namespace topk::server {

// What RegisterRegion asks the server to open (topk.v1.RegisterRegionRequest's
// kind); std::monostate: no kind was set.
struct ShmRegionSpec {
  std::string shm_name;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};
struct CudaIpcRegionSpec {
  absl::string_view ipc_handle;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
  GpuName device;
};
struct CudaEventSpec {
  absl::string_view ipc_event_handle;
  GpuName device;
};
using RegionSpec = std::variant<std::monostate, ShmRegionSpec, CudaIpcRegionSpec, CudaEventSpec>;

// What a registration opened.
struct RegisteredRegion {
  uint64_t byte_size = 0;
  int32_t device_ordinal = -1;
};

// A stream's last resolved session: a pipeline's requests name the same
// session, so after the first they skip the registry's lock. Used by one
// thread at a time (the stream's reads are sequential).
struct SessionCache {
  std::string id;
  std::shared_ptr<const SessionRegions> regions;
};

// The regions a channel reads and writes, leased for the channel's life.
struct ChannelLeases {
  int32_t device_ordinal = -1;
  std::vector<RegionLease> leases;  // in the order named
};

struct RegionManagerConfig {
  RegionRegistryLimits registry;
  BindingRules binding;
  // The GPUs the server serves (CUDA regions open on these only).
  std::vector<int> served_gpus;
};

class RegionManager {
 public:
  explicit RegionManager(RegionManagerConfig config);
  ~RegionManager();  // CloseAllSessions()
  RegionManager(const RegionManager&) = delete;
  RegionManager& operator=(const RegionManager&) = delete;

  // A new session with an unguessable id; RESOURCE_EXHAUSTED past the limit.
  absl::StatusOr<std::string> OpenSession();
  // Drops the session's regions (each closes with its last lease).
  void CloseSession(const std::string& id);
  // Drops every session (shutdown).
  void CloseAllSessions();

  // Opens `spec` and registers it as `name` in `session`: INVALID_ARGUMENT
  // for a bad name or what cannot be opened, NOT_FOUND for an unknown
  // session (before anything is opened), ALREADY_EXISTS for a taken name,
  // PERMISSION_DENIED for shared memory without the session's proof.
  absl::StatusOr<RegisteredRegion> Register(const std::string& session, const std::string& name,
                                            const RegionSpec& spec);
  // Drops one region, or every region of the session with `all`; how many.
  absl::StatusOr<int> Unregister(const std::string& session, const std::string& name, bool all);
  // The session's regions in name order.
  absl::StatusOr<std::vector<RegionListing>> List(const std::string& session) const;

  // Binds a request's references (see region_binding.h) to leased regions of
  // its session. `cache`: optional, the calling stream's last session.
  absl::StatusOr<BoundSelect> BindSelect(const SelectReferences& refs, RegionBinding& binding,
                                         SessionCache* cache = nullptr) const;

  // Leases the regions a channel names, all in memory the engine's backend
  // can serve a channel from: one GPU's (CUDA IPC) on a GPU server
  // (`gpu_backend`), shared memory on a CPU server.
  absl::StatusOr<ChannelLeases> LeaseForChannel(const std::string& session,
                                                absl::Span<const absl::string_view> names,
                                                bool gpu_backend) const;

  int64_t session_count() const { return registry_.session_count(); }

 private:
  RegionManagerConfig config_;
  RegionRegistry registry_;
};

}  // namespace topk::server
