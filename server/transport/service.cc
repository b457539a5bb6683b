#include "server/transport/service.h"

#include <utility>

namespace topk::server {

TopKService::TopKService(Engine* engine, Metrics* metrics, ServiceConfig config)
    : engine_(engine),
      metrics_(metrics),
      config_(std::move(config)),
      regions_(engine, config_.regions),
      select_{.engine = engine,
              .metrics = metrics,
              .on_no_usable_device = [this] { ReportNoUsableDevice(); },
              .regions = &regions_} {}

void TopKService::ReportNoUsableDevice() {
  if (!device_lost_reported_.exchange(true) && config_.on_device_lost) config_.on_device_lost();
}

grpc::ServerUnaryReactor* TopKService::Select(grpc::CallbackServerContext* context,
                                              const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) {
  return StartUnarySelect(select_, context, request, response);
}

grpc::ServerReadReactor<v1::SelectChunk>* TopKService::SelectStream(
    grpc::CallbackServerContext* context, v1::SelectResponse* response) {
  return StartStreamSelect(select_, context, response);
}

grpc::ServerUnaryReactor* TopKService::GetServerInfo(grpc::CallbackServerContext* context,
                                                     const v1::GetServerInfoRequest* /*request*/,
                                                     v1::ServerInfo* response) {
  response->set_version(config_.version);
  response->set_backend(engine_->backend_name());
  response->set_backend_reason(engine_->backend_reason());
  for (const EngineDevice& device : engine_->devices()) {
    v1::DeviceInfo* info = response->add_devices();
    info->set_ordinal(device.description.ordinal);
    info->set_name(device.description.name);
    info->set_uuid(device.description.uuid);
    info->set_memory_bytes(device.description.memory_bytes);
    info->set_workers(device.workers);
    info->set_usable(device.usable);
  }
  const RequestLimits& limits = engine_->limits();
  v1::Limits* out = response->mutable_limits();
  out->set_max_k(limits.max_k);
  out->set_max_rows(limits.max_rows);
  out->set_max_width(limits.max_width);
  out->set_max_batch_bytes(limits.max_batch_bytes);
  out->set_queue_depth(engine_->options().queue_depth);
  out->set_max_recv_message_bytes(config_.max_recv_message_bytes);
  out->set_max_send_message_bytes(config_.max_send_message_bytes);
  response->set_echo_enabled(config_.enable_echo);
  response->set_regions_enabled(config_.regions.enabled);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* TopKService::GetStats(grpc::CallbackServerContext* context,
                                                const v1::GetStatsRequest* request,
                                                v1::Stats* response) {
  metrics_->FillStats(*response);
  if (request->include_prometheus_text()) response->set_prometheus_text(metrics_->PrometheusText());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* TopKService::Echo(grpc::CallbackServerContext* context,
                                            const v1::EchoMessage* request,
                                            v1::EchoMessage* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!config_.enable_echo) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                 "Echo is disabled; start the server with --enable_echo"));
    return reactor;
  }
  const std::string& payload = request->payload();
  const int64_t keep = request->response_bytes();
  if (keep > 0 && keep < static_cast<int64_t>(payload.size())) {
    response->set_payload(payload.data(), keep);
  } else {
    response->set_payload(payload);
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<v1::SessionEvent>* TopKService::OpenSession(
    grpc::CallbackServerContext* context, const v1::OpenSessionRequest* /*request*/) {
  return regions_.OpenSession(context);
}

grpc::ServerUnaryReactor* TopKService::RegisterRegion(grpc::CallbackServerContext* context,
                                                      const v1::RegisterRegionRequest* request,
                                                      v1::RegisterRegionResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(regions_.Register(context, *request, *response));
  return reactor;
}

grpc::ServerUnaryReactor* TopKService::UnregisterRegion(grpc::CallbackServerContext* context,
                                                        const v1::UnregisterRegionRequest* request,
                                                        v1::UnregisterRegionResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(regions_.Unregister(context, *request, *response));
  return reactor;
}

grpc::ServerUnaryReactor* TopKService::ListRegions(grpc::CallbackServerContext* context,
                                                   const v1::ListRegionsRequest* request,
                                                   v1::ListRegionsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(regions_.List(context, *request, *response));
  return reactor;
}

}  // namespace topk::server
