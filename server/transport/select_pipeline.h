// SelectPipeline: whole SelectRequests back to back on one bidirectional
// stream, several in flight, each answered by a SelectReply when the engine
// is done with it (in completion order). A request that fails gets a reply
// with its status; the stream itself ends only when the client half-closes
// or cancels it, or it sits idle past the call tracker's timeout. The
// per-request rules (limits, validation, regions, metrics, lame duck) are
// unary Select's: both go through PrepareSelect and FinishSelect.
#pragma once

#include "grpcpp/grpcpp.h"
#include "server/transport/select_reactors.h"

namespace topk::server {

// Creates the reactor of one SelectPipeline; it deletes itself once gRPC,
// the call tracker and its last request are done with it.
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StartPipelineSelect(
    const SelectContext& select, grpc::CallbackServerContext* context);

}  // namespace topk::server
