// The transport side of regions: sessions as server-streaming calls that
// live as long as the client holds them, the Register/Unregister/List RPCs,
// and a Select request's references decoded from the wire. Everything about
// the memory itself (opening it, the session's regions, leases, the checks
// of every byte a request names) is the regions module's (RegionManager);
// this file only speaks gRPC and the wire to it.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "server/backends/row_source.h"
#include "server/engine/channel_registry.h"
#include "server/engine/engine.h"
#include "server/engine/select_job.h"
#include "server/regions/region_binding.h"
#include "server/regions/region_manager.h"
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
  // The regions module, for the channels' leases.
  const RegionManager& manager() const { return manager_; }
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
  RegionManager manager_;
  ChannelRegistry* channels_ = nullptr;
  absl::Mutex sessions_mutex_;
  absl::flat_hash_map<SessionReactor*, std::weak_ptr<SessionReactor>> sessions_
      ABSL_GUARDED_BY(sessions_mutex_);
};

}  // namespace topk::server
