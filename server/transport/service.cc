#include "server/transport/service.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "server/transport/raw_messages.h"
#include "server/transport/score_dtype.h"
#include "server/transport/select_pipeline.h"

namespace topk::server {

TopKService::TopKService(Engine* engine, Metrics* metrics, ServiceConfig config)
    : engine_(engine),
      metrics_(metrics),
      config_(std::move(config)),
      regions_(engine, config_.regions),
      channels_(engine, &regions_, config_.regions.enabled ? config_.channels : nullptr),
      calls_(config_.call_limits),
      select_{.engine = engine,
              .metrics = metrics,
              .calls = &calls_,
              .max_send_message_bytes = config_.max_send_message_bytes,
              .on_no_usable_device = [this] { ReportNoUsableDevice(); },
              .regions = &regions_} {
  if (channels_.enabled()) regions_.AttachChannels(config_.channels);
}

namespace {

// Parses `request` into `message`, or finishes the call with INVALID_ARGUMENT.
template <typename Message>
bool ParseOrFinish(const grpc::ByteBuffer& request, Message& message,
                   grpc::ServerUnaryReactor* reactor) {
  absl::Status parsed = ParseMessage(request, message);
  if (!parsed.ok()) reactor->Finish(ToGrpcStatus(parsed));
  return parsed.ok();
}

void FinishWith(const google::protobuf::MessageLite& message, grpc::ByteBuffer& response,
                grpc::ServerUnaryReactor* reactor) {
  reactor->Finish(ToGrpcStatus(SerializeMessage(message, response)));
}

}  // namespace

bool TopKService::Drain(absl::Time deadline) {
  calls_.StartDraining();
  return calls_.WaitForCalls(deadline);
}

void TopKService::ReportNoUsableDevice() {
  if (!device_lost_reported_.exchange(true) && config_.on_device_lost) config_.on_device_lost();
}

grpc::ServerUnaryReactor* TopKService::Select(grpc::CallbackServerContext* context,
                                              const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) {
  return StartUnarySelect(select_, context, request, response);
}

grpc::ServerReadReactor<grpc::ByteBuffer>* TopKService::SelectStream(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return StartStreamSelect(select_, context, response);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* TopKService::SelectPipeline(
    grpc::CallbackServerContext* context) {
  return StartPipelineSelect(select_, context);
}

grpc::ServerUnaryReactor* TopKService::GetServerInfo(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  v1::GetServerInfoRequest parsed;
  if (!ParseOrFinish(*request, parsed, reactor)) return reactor;
  v1::ServerInfo info;
  FillServerInfo(info);
  FinishWith(info, *response, reactor);
  return reactor;
}

void TopKService::FillServerInfo(v1::ServerInfo& info) const {
  info.set_version(config_.version);
  info.set_backend(engine_->backend_name());
  info.set_backend_reason(engine_->backend_reason());
  for (const EngineDevice& device : engine_->devices()) {
    v1::DeviceInfo* out = info.add_devices();
    out->set_ordinal(device.description.ordinal);
    out->set_name(device.description.name);
    out->set_uuid(device.description.uuid);
    out->set_memory_bytes(device.description.memory_bytes);
    out->set_workers(device.workers);
    out->set_usable(device.usable);
  }
  const RequestLimits& limits = engine_->limits();
  v1::Limits* out = info.mutable_limits();
  out->set_max_k(limits.max_k);
  out->set_max_rows(limits.max_rows);
  out->set_max_width(limits.max_width);
  out->set_max_batch_bytes(limits.max_batch_bytes);
  out->set_queue_depth(engine_->options().queue_depth);
  out->set_max_recv_message_bytes(config_.max_recv_message_bytes);
  out->set_max_send_message_bytes(config_.max_send_message_bytes);
  info.set_echo_enabled(config_.enable_echo);
  info.set_regions_enabled(config_.regions.enabled);
  info.set_mps(engine_->mps());
  info.set_channels_enabled(channels_.enabled());
  // The types every device serves (a request may land on any of them).
  std::vector<EngineDevice> devices = engine_->devices();
  for (ScoreType type : kAllScoreTypes) {
    const bool everywhere = std::all_of(devices.begin(), devices.end(), [&](const auto& device) {
      return absl::c_linear_search(device.description.score_types, type);
    });
    if (everywhere && !devices.empty()) info.add_dtypes(ScoreTypeToWire(type));
  }
}

grpc::ServerUnaryReactor* TopKService::GetStats(grpc::CallbackServerContext* context,
                                                const grpc::ByteBuffer* request,
                                                grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  v1::GetStatsRequest parsed;
  if (!ParseOrFinish(*request, parsed, reactor)) return reactor;
  v1::Stats stats;
  metrics_->FillStats(stats);
  if (config_.channels != nullptr) {
    stats.set_channel_calls(config_.channels->calls());
    stats.set_channel_errors(config_.channels->errors());
    stats.set_channels_open(config_.channels->open_channels());
  }
  if (parsed.include_prometheus_text()) stats.set_prometheus_text(metrics_->PrometheusText());
  FinishWith(stats, *response, reactor);
  return reactor;
}

grpc::ServerUnaryReactor* TopKService::Echo(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!config_.enable_echo) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                 "Echo is disabled; start the server with --enable_echo"));
    return reactor;
  }
  v1::EchoMessage parsed;
  if (!ParseOrFinish(*request, parsed, reactor)) return reactor;
  v1::EchoMessage answer;
  const std::string& payload = parsed.payload();
  const int64_t keep = parsed.response_bytes();
  if (keep > 0 && keep < static_cast<int64_t>(payload.size())) {
    answer.set_payload(payload.data(), keep);
  } else {
    answer.set_payload(payload);
  }
  FinishWith(answer, *response, reactor);
  return reactor;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* TopKService::OpenSession(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  absl::Status refused;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* reactor =
      regions_.OpenSession(context, request, refused);
  if (!refused.ok()) metrics_->OnRegionRpcError(refused.code());
  return reactor;
}

namespace {

// The region RPCs: parsed here (INVALID_ARGUMENT naming the message when the
// bytes are not one), served by the region service.
// Refusals are counted (topk_region_rpc_errors_total).
template <typename Request, typename Response, typename Serve>
grpc::ServerUnaryReactor* ServeRegionRpc(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer& request,
                                         grpc::ByteBuffer& response, Metrics& metrics,
                                         Serve serve) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Request parsed;
  if (absl::Status valid = ParseMessage(request, parsed); !valid.ok()) {
    metrics.OnRegionRpcError(valid.code());
    reactor->Finish(ToGrpcStatus(valid));
    return reactor;
  }
  Response answer;
  const grpc::Status status = serve(parsed, answer);
  if (!status.ok()) {
    metrics.OnRegionRpcError(static_cast<absl::StatusCode>(status.error_code()));
    reactor->Finish(status);
    return reactor;
  }
  FinishWith(answer, response, reactor);
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* TopKService::RegisterRegion(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  return ServeRegionRpc<v1::RegisterRegionRequest, v1::RegisterRegionResponse>(
      context, *request, *response, *metrics_,
      [&](const auto& parsed, auto& answer) { return regions_.Register(context, parsed, answer); });
}

grpc::ServerUnaryReactor* TopKService::UnregisterRegion(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return ServeRegionRpc<v1::UnregisterRegionRequest, v1::UnregisterRegionResponse>(
      context, *request, *response, *metrics_, [&](const auto& parsed, auto& answer) {
        return regions_.Unregister(context, parsed, answer);
      });
}

grpc::ServerUnaryReactor* TopKService::ListRegions(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) {
  return ServeRegionRpc<v1::ListRegionsRequest, v1::ListRegionsResponse>(
      context, *request, *response, *metrics_,
      [&](const auto& parsed, auto& answer) { return regions_.List(context, parsed, answer); });
}

grpc::ServerUnaryReactor* TopKService::OpenChannel(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) {
  return ServeRegionRpc<v1::OpenChannelRequest, v1::OpenChannelResponse>(
      context, *request, *response, *metrics_,
      [&](const auto& parsed, auto& answer) { return channels_.Open(context, parsed, answer); });
}

grpc::ServerUnaryReactor* TopKService::CloseChannel(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  return ServeRegionRpc<v1::CloseChannelRequest, v1::CloseChannelResponse>(
      context, *request, *response, *metrics_,
      [&](const auto& parsed, auto& answer) { return channels_.Close(context, parsed, answer); });
}

}  // namespace topk::server
