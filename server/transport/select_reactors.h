// The reactors of Select and SelectStream. Both are SelectJobs: the engine
// completes them on a worker thread, which encodes the response and
// finishes the RPC.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"
#include "server/engine/engine.h"
#include "server/engine/select_job.h"
#include "server/transport/call_tracker.h"
#include "server/transport/metrics.h"
#include "server/transport/region_service.h"
#include "topk/v1/topk.grpc.pb.h"

namespace topk::server {

// What every Select reactor reaches: owned by the service, outlives every call.
struct SelectContext {
  Engine* engine = nullptr;
  Metrics* metrics = nullptr;
  CallTracker* calls = nullptr;
  // gRPC's send limit: a response over it is refused here (RESOURCE_EXHAUSTED,
  // counted) instead of failing inside gRPC after it was counted a success.
  int64_t max_send_message_bytes = 0;
  // Called after a request failed with UNAVAILABLE and no device is usable
  // (the service then turns health NOT_SERVING).
  std::function<void()> on_no_usable_device;
  // Binds requests that name regions.
  const RegionService* regions = nullptr;
  // SelectPipeline: requests of one stream in flight at once; past it the
  // server stops reading the stream until one is answered (the client's
  // writes then wait on gRPC's flow control).
  int max_pipelined = 64;
};

// Encodes `output` into `response` (LE int32 indices, optional values,
// timings); returns the bytes written.
int64_t EncodeResponse(const SelectOutput& output, int32_t k, int64_t rows, int64_t total_us,
                       v1::SelectResponse& response);

// gRPC's status for an absl::Status (same code numbers).
grpc::Status ToGrpcStatus(const absl::Status& status);

// Creates the reactor of one unary Select (raw bytes in and out: see
// raw_select.h); it deletes itself in OnDone.
grpc::ServerUnaryReactor* StartUnarySelect(const SelectContext& select,
                                           grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response);

// Creates the reactor of one SelectStream (raw: chunks are parsed here, so a
// corrupt chunk fails the stream instead of ending it); it deletes itself
// once gRPC and the call tracker are both done with it.
grpc::ServerReadReactor<grpc::ByteBuffer>* StartStreamSelect(const SelectContext& select,
                                                             grpc::CallbackServerContext* context,
                                                             grpc::ByteBuffer* response);

}  // namespace topk::server
