#include "server/transport/region_service.h"

#include <string>
#include <utility>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/transport/raw_messages.h"
#include "server/transport/select_reactors.h"

namespace topk::server {
namespace {

GpuName ToGpuName(const v1::GpuDevice& device) {
  return GpuName{.uuid = device.uuid(), .ordinal = device.ordinal()};
}

// RegisterRegionRequest's kind as the regions module takes it.
RegionSpec ToRegionSpec(const v1::RegisterRegionRequest& request) {
  switch (request.kind_case()) {
    case v1::RegisterRegionRequest::kShm:
      return ShmRegionSpec{.shm_name = request.shm().shm_name(),
                           .offset = request.shm().offset(),
                           .byte_size = request.shm().byte_size()};
    case v1::RegisterRegionRequest::kCudaIpc:
      return CudaIpcRegionSpec{.ipc_handle = request.cuda_ipc().ipc_handle(),
                               .offset = request.cuda_ipc().offset(),
                               .byte_size = request.cuda_ipc().byte_size(),
                               .device = ToGpuName(request.cuda_ipc().device())};
    case v1::RegisterRegionRequest::kCudaEvent:
      return CudaEventSpec{.ipc_event_handle = request.cuda_event().ipc_event_handle(),
                           .device = ToGpuName(request.cuda_event().device())};
    default:
      return std::monostate();
  }
}

// How this server's engine binds requests and opens regions.
RegionManagerConfig ManagerConfig(const Engine& engine) {
  RegionManagerConfig config;
  for (const EngineDevice& device : engine.devices()) {
    if (device.description.ordinal >= 0) config.served_gpus.push_back(device.description.ordinal);
  }
  config.binding = BindingRules{.limits = engine.limits(),
                                .cpu_backend = config.served_gpus.empty(),
                                .host_rows_read_in_place = engine.reads_host_rows_in_place()};
  return config;
}

}  // namespace

bool IsLocalPeer(absl::string_view peer) {
  if (absl::StartsWith(peer, "unix:") || absl::StartsWith(peer, "unix-abstract:")) return true;
  if (absl::StartsWith(peer, "ipv4:127.")) return true;
  if (absl::StartsWith(peer, "ipv6:[::1]:")) return true;
  // An IPv4 client on a dual-stack socket.
  if (absl::StartsWith(peer, "ipv6:[::ffff:127.")) return true;
  return false;
}

// One session: the server writes its id, then leaves the stream open until
// the client cancels it, its connection drops, or the server shuts down.
// It owns itself through `self_` until OnDone, so EndSessions can keep one
// alive (a shared_ptr from the service's weak set) while it ends it.
class RegionService::SessionReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                                            public std::enable_shared_from_this<SessionReactor> {
 public:
  SessionReactor(RegionService* service, std::string id) : service_(service), id_(std::move(id)) {
    v1::SessionEvent event;
    event.set_session_id(id_);
    // A 32-character id always serializes.
    (void)SerializeMessage(event, event_);
  }

  void Start(std::shared_ptr<SessionReactor> self) {
    self_ = std::move(self);
    StartWrite(&event_);
  }

  void OnWriteDone(bool ok) override {
    // Nothing more to send; a failed write means the client is gone.
    if (!ok) End(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
  }
  void OnCancel() override { End(grpc::Status(grpc::StatusCode::CANCELLED, "session ended")); }
  void OnDone() override {
    service_->EndSession(id_);
    service_->Forget(this);
    self_.reset();  // may delete this
  }

  // Idempotent; safe from any thread while the reactor is alive.
  void End(const grpc::Status& status) {
    if (ended_.exchange(true)) return;
    // Release the regions now rather than at OnDone: requests in flight
    // hold leases of their own.
    service_->EndSession(id_);
    Finish(status);
  }

 private:
  RegionService* service_;
  std::string id_;
  grpc::ByteBuffer event_;  // the serialized SessionEvent
  std::atomic<bool> ended_{false};
  std::shared_ptr<SessionReactor> self_;
};

RegionService::RegionService(Engine* engine, RegionOptions options)
    : engine_(engine), options_(options), manager_(ManagerConfig(*engine)) {}

RegionService::~RegionService() {
  EndSessions();
  manager_.CloseAllSessions();
}

absl::Status RegionService::CheckAllowed(grpc::CallbackServerContext* context) const {
  if (!options_.enabled) {
    return absl::UnimplementedError("regions are disabled; start the server with --enable_regions");
  }
  if (!options_.allow_remote && !IsLocalPeer(context->peer())) {
    return absl::PermissionDeniedError(
        absl::StrCat("regions are served to loopback and unix-socket peers only (peer ",
                     context->peer(), "); see --regions_allow_remote"));
  }
  return absl::OkStatus();
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* RegionService::OpenSession(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request, absl::Status& refused) {
  absl::Status allowed = CheckAllowed(context);
  v1::OpenSessionRequest parsed;
  if (allowed.ok()) allowed = ParseMessage(*request, parsed);
  absl::StatusOr<std::string> id =
      allowed.ok() ? manager_.OpenSession() : absl::StatusOr<std::string>(allowed);
  if (!id.ok()) {
    // A reactor that only fails.
    class Refusal final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
     public:
      explicit Refusal(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
      void OnDone() override { delete this; }
    };
    refused = id.status();
    return new Refusal(id.status());
  }
  auto session = std::make_shared<SessionReactor>(this, *id);
  {
    absl::MutexLock lock(&sessions_mutex_);
    sessions_.emplace(session.get(), session);
  }
  SessionReactor* reactor = session.get();
  reactor->Start(std::move(session));
  return reactor;
}

void RegionService::EndSession(const std::string& id) {
  if (channels_ != nullptr) channels_->CloseSession(id);
  manager_.CloseSession(id);
}

void RegionService::Forget(SessionReactor* session) {
  absl::MutexLock lock(&sessions_mutex_);
  sessions_.erase(session);
}

void RegionService::EndSessions() {
  std::vector<std::shared_ptr<SessionReactor>> open;
  {
    absl::MutexLock lock(&sessions_mutex_);
    for (const auto& [raw, weak] : sessions_) {
      if (std::shared_ptr<SessionReactor> session = weak.lock()) open.push_back(std::move(session));
    }
  }
  // Outside the lock: gRPC may run OnDone (which takes it) on this thread.
  for (const std::shared_ptr<SessionReactor>& session : open) {
    session->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
  }
}

grpc::Status RegionService::Register(grpc::CallbackServerContext* context,
                                     const v1::RegisterRegionRequest& request,
                                     v1::RegisterRegionResponse& response) {
  if (absl::Status s = CheckAllowed(context); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<RegisteredRegion> region =
      manager_.Register(request.session_id(), request.name(), ToRegionSpec(request));
  if (!region.ok()) return ToGrpcStatus(region.status());
  response.set_byte_size(region->byte_size);
  response.set_device_ordinal(region->device_ordinal);
  return grpc::Status::OK;
}

grpc::Status RegionService::Unregister(grpc::CallbackServerContext* context,
                                       const v1::UnregisterRegionRequest& request,
                                       v1::UnregisterRegionResponse& response) {
  if (absl::Status s = CheckAllowed(context); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<int> removed =
      manager_.Unregister(request.session_id(), request.name(), request.all());
  if (!removed.ok()) return ToGrpcStatus(removed.status());
  response.set_unregistered(*removed);
  return grpc::Status::OK;
}

grpc::Status RegionService::List(grpc::CallbackServerContext* context,
                                 const v1::ListRegionsRequest& request,
                                 v1::ListRegionsResponse& response) {
  if (absl::Status s = CheckAllowed(context); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<std::vector<RegionListing>> listing = manager_.List(request.session_id());
  if (!listing.ok()) return ToGrpcStatus(listing.status());
  for (const RegionListing& entry : *listing) {
    v1::RegionInfo* info = response.add_regions();
    info->set_name(entry.name);
    info->set_kind(std::string(RegionKindName(entry.kind)));
    info->set_byte_size(entry.byte_size);
    info->set_device_ordinal(entry.device_ordinal);
    info->set_in_flight(entry.in_flight);
  }
  return grpc::Status::OK;
}

}  // namespace topk::server
