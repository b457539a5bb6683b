// topk.v1.TopK on gRPC's callback API: requests are validated on the gRPC
// thread, queued to the engine, and answered from the worker that ran them,
// so no gRPC thread ever blocks on a selection.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "server/engine/engine.h"
#include "server/transport/call_tracker.h"
#include "server/transport/channel_service.h"
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
  CallLimits call_limits;
  // The channel registry (null: no channels), owned by the composition root.
  ChannelRegistry* channels = nullptr;
};

// Every method is served raw (ByteBuffer in and out): Select so its score
// bytes are copied once, by the worker, instead of first by protobuf's
// decoder; the others so a request that does not parse gets INVALID_ARGUMENT
// saying so (gRPC's generated handlers answer a bare UNIMPLEMENTED, or end a
// stream cleanly at a corrupt chunk). With every method raw the base is the
// plain Service: its typed callback twin of SelectPipeline would clash.
using RawTopKService = v1::TopK::WithRawCallbackMethod_Select<
    v1::TopK::WithRawCallbackMethod_SelectStream<v1::TopK::WithRawCallbackMethod_SelectPipeline<
        v1::TopK::WithRawCallbackMethod_GetServerInfo<v1::TopK::WithRawCallbackMethod_GetStats<
            v1::TopK::WithRawCallbackMethod_Echo<v1::TopK::WithRawCallbackMethod_OpenSession<
                v1::TopK::WithRawCallbackMethod_RegisterRegion<
                    v1::TopK::WithRawCallbackMethod_UnregisterRegion<
                        v1::TopK::WithRawCallbackMethod_ListRegions<
                            v1::TopK::WithRawCallbackMethod_OpenChannel<
                                v1::TopK::WithRawCallbackMethod_CloseChannel<
                                    v1::TopK::Service>>>>>>>>>>>>;

class TopKService final : public RawTopKService {
 public:
  TopKService(Engine* engine, Metrics* metrics, ServiceConfig config);

  grpc::ServerUnaryReactor* Select(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerReadReactor<grpc::ByteBuffer>* SelectStream(grpc::CallbackServerContext* context,
                                                          grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* SelectPipeline(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;

  grpc::ServerWriteReactor<grpc::ByteBuffer>* OpenSession(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* RegisterRegion(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* UnregisterRegion(grpc::CallbackServerContext* context,
                                             const grpc::ByteBuffer* request,
                                             grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListRegions(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* OpenChannel(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* CloseChannel(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;

  // Ends the region sessions (before the server drains).
  void EndSessions() { regions_.EndSessions(); }

  // Lame duck: new Select calls get UNAVAILABLE, idle streams are ended; true
  // once every Select call in flight finished before `deadline` (or Hurry()).
  bool Drain(absl::Time deadline);
  void Hurry() { calls_.Hurry(); }
  const CallTracker& calls() const { return calls_; }

  TopKService(const TopKService&) = delete;
  TopKService& operator=(const TopKService&) = delete;

 private:
  void ReportNoUsableDevice();
  void FillServerInfo(v1::ServerInfo& info) const;

  Engine* engine_;
  Metrics* metrics_;
  ServiceConfig config_;
  RegionService regions_;
  ChannelService channels_;
  CallTracker calls_;
  SelectContext select_;
  std::atomic<bool> device_lost_reported_{false};
};

}  // namespace topk::server
