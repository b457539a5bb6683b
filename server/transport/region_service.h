// The transport side of regions: sessions as server-streaming calls that
// live as long as the client holds them, the Register/Unregister/List RPCs,
// and the binding of a Select request's references (rows, lengths, output,
// events) to leased regions, with every byte range checked on the host
// before the request reaches the engine.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "server/backends/backend.h"
#include "server/backends/row_source.h"
#include "server/engine/channel_registry.h"
#include "server/engine/engine.h"
#include "server/engine/select_job.h"
#include "server/regions/cuda_ipc_region.h"
#include "server/regions/region.h"
#include "server/regions/region_registry.h"
#include "server/regions/shm_region.h"
#include "server/transport/raw_select.h"
#include "topk/v1/topk.grpc.pb.h"

namespace topk::server {

struct RegionOptions {
  // Serve the region RPCs and Select by reference (--enable_regions).
  bool enabled = false;
  // Also from peers that are not loopback or unix-socket connections
  // (--regions_allow_remote). Off: a region names memory on this host, so
  // a remote peer has no business registering one.
  bool allow_remote = false;
};

// Whether a gRPC peer string ("ipv4:127.0.0.1:5", "ipv6:[::1]:5",
// "unix:/path", ...) is a connection from this host.
bool IsLocalPeer(absl::string_view peer);

// What a Select by reference holds while it runs: leases on its regions
// (so unregistering them waits), and the host copies of its lengths and
// row offsets (so the client cannot change them after they were checked).
//
// Inline capacity for the common request (rows, output, a few events; up to
// 64 rows) so that binding one allocates nothing.
struct RegionBinding {
  absl::InlinedVector<RegionLease, 6> leases;
  // leases[i]'s name, in the request's message (which outlives the binding).
  absl::InlinedVector<absl::string_view, 6> names;
  std::optional<RegionRows> rows;
  absl::InlinedVector<int32_t, 64> lengths;
  absl::InlinedVector<int64_t, 64> row_offsets;
  OutputTarget output;
};

// A stream's last resolved session: a pipeline's requests name the same
// session, so after the first they skip the registry's lock. Used by one
// thread at a time (the stream's reads are sequential).
struct SessionCache {
  std::string id;
  std::shared_ptr<const SessionRegions> regions;
};

// After the request's reads and writes: DATA_LOSS naming the region when
// one of them faulted (its memory shrank under the server; what the request
// read from it may be zeros, what it wrote is lost).
absl::Status CheckNoFaults(const RegionBinding& binding);

class RegionService {
 public:
  RegionService(Engine* engine, RegionOptions options);
  ~RegionService();  // EndSessions()

  RegionService(const RegionService&) = delete;
  RegionService& operator=(const RegionService&) = delete;

  // `request`: the serialized OpenSessionRequest (refused when it is not
  // one). `refused`: why the returned reactor only fails, else OK.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* OpenSession(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          absl::Status& refused);
  grpc::Status Register(grpc::CallbackServerContext* context,
                        const v1::RegisterRegionRequest& request,
                        v1::RegisterRegionResponse& response);
  grpc::Status Unregister(grpc::CallbackServerContext* context,
                          const v1::UnregisterRegionRequest& request,
                          v1::UnregisterRegionResponse& response);
  grpc::Status List(grpc::CallbackServerContext* context, const v1::ListRegionsRequest& request,
                    v1::ListRegionsResponse& response);

  // Binds a Select request that names regions (raw.references_regions,
  // decoded in full in raw.by_reference); its inline rows, when only the
  // output is by reference, are `inline_rows`. On success the returned
  // input points into `binding` and `raw`, which must outlive the job.
  // `cache`: optional, the calling stream's last session.
  absl::StatusOr<SelectInput> BindSelect(grpc::CallbackServerContext* context,
                                         const RawSelectRequest& raw, const RowSource* inline_rows,
                                         RegionBinding& binding,
                                         SessionCache* cache = nullptr) const;

  // Ends every open session stream (shutdown: they would otherwise hold the
  // drain until its deadline). Requests in flight keep their leases.
  void EndSessions();

  bool enabled() const { return options_.enabled; }
  RegionRegistry& registry() { return registry_; }
  // The channels a session's end closes with its regions (set once, before
  // serving).
  void AttachChannels(ChannelRegistry* channels) { channels_ = channels; }
  // UNIMPLEMENTED without --enable_regions, PERMISSION_DENIED for a remote
  // peer without --regions_allow_remote: the rule every region and channel
  // RPC follows.
  absl::Status CheckAllowed(grpc::CallbackServerContext* context) const;

 private:
  class SessionReactor;
  void Forget(SessionReactor* session);
  // Closes the session's channels, then its regions.
  void EndSession(const std::string& id);

  Engine* engine_;
  RegionOptions options_;
  std::vector<int> served_gpus_;
  RegionRegistry registry_;
  ChannelRegistry* channels_ = nullptr;
  absl::Mutex sessions_mutex_;
  absl::flat_hash_map<SessionReactor*, std::weak_ptr<SessionReactor>> sessions_
      ABSL_GUARDED_BY(sessions_mutex_);
};

}  // namespace topk::server
