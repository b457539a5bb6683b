// The transport side of channels: OpenChannel / CloseChannel. Checks the
// request against the server's limits and the session's regions (leased
// for the channel's life), then hands it to the engine's channel registry.
// Calls themselves never reach the transport: they go through the control
// block (docs/channels.md).
#pragma once

#include "grpcpp/grpcpp.h"
#include "server/engine/channel_registry.h"
#include "server/engine/engine.h"
#include "server/transport/region_service.h"
#include "topk/v1/topk.grpc.pb.h"

namespace topk::server {

class ChannelService {
 public:
  // `channels` null: OpenChannel is UNIMPLEMENTED (regions disabled).
  ChannelService(const Engine* engine, RegionService* regions, ChannelRegistry* channels)
      : engine_(engine), regions_(regions), channels_(channels) {}

  grpc::Status Open(grpc::CallbackServerContext* context, const v1::OpenChannelRequest& request,
                    v1::OpenChannelResponse& response);
  grpc::Status Close(grpc::CallbackServerContext* context, const v1::CloseChannelRequest& request,
                     v1::CloseChannelResponse& response);

  bool enabled() const { return channels_ != nullptr; }

 private:
  const Engine* engine_;
  RegionService* regions_;
  ChannelRegistry* channels_;
};

}  // namespace topk::server
