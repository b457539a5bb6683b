// topk.v1.TopK on gRPC's callback API: requests are validated on the gRPC
// thread, queued to the engine, and answered from the worker that ran them,
// so no gRPC thread ever blocks on a selection.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "server/engine/engine.h"
#include "server/transport/metrics.h"
#include "server/transport/region_service.h"
#include "server/transport/select_reactors.h"
#include "topk/v1/topk.grpc.pb.h"

namespace topk::server {

struct ServiceConfig {
  std::string version;
  bool enable_echo = false;
  int64_t max_recv_message_bytes = 0;
  int64_t max_send_message_bytes = 0;
  // Called (once) when a request finds every device unusable: the server
  // flips its health to NOT_SERVING.
  std::function<void()> on_device_lost;
  RegionOptions regions;
};

// Select is served raw (ByteBuffer in and out) so its score bytes are copied
// once, by the worker, instead of first by protobuf's decoder.
class TopKService final : public v1::TopK::WithRawCallbackMethod_Select<v1::TopK::CallbackService> {
 public:
  TopKService(Engine* engine, Metrics* metrics, ServiceConfig config);

  grpc::ServerUnaryReactor* Select(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerReadReactor<v1::SelectChunk>* SelectStream(grpc::CallbackServerContext* context,
                                                         v1::SelectResponse* response) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const v1::GetServerInfoRequest* request,
                                          v1::ServerInfo* response) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context,
                                     const v1::GetStatsRequest* request,
                                     v1::Stats* response) override;
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context,
                                 const v1::EchoMessage* request,
                                 v1::EchoMessage* response) override;
  grpc::ServerWriteReactor<v1::SessionEvent>* OpenSession(
      grpc::CallbackServerContext* context, const v1::OpenSessionRequest* request) override;
  grpc::ServerUnaryReactor* RegisterRegion(grpc::CallbackServerContext* context,
                                           const v1::RegisterRegionRequest* request,
                                           v1::RegisterRegionResponse* response) override;
  grpc::ServerUnaryReactor* UnregisterRegion(grpc::CallbackServerContext* context,
                                             const v1::UnregisterRegionRequest* request,
                                             v1::UnregisterRegionResponse* response) override;
  grpc::ServerUnaryReactor* ListRegions(grpc::CallbackServerContext* context,
                                        const v1::ListRegionsRequest* request,
                                        v1::ListRegionsResponse* response) override;

  // Ends the region sessions (before the server drains).
  void EndSessions() { regions_.EndSessions(); }

  TopKService(const TopKService&) = delete;
  TopKService& operator=(const TopKService&) = delete;

 private:
  void ReportNoUsableDevice();

  Engine* engine_;
  Metrics* metrics_;
  ServiceConfig config_;
  RegionService regions_;
  SelectContext select_;
  std::atomic<bool> device_lost_reported_{false};
};

}  // namespace topk::server
