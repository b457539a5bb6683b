// The reactors of Select and SelectStream. Both are SelectJobs: the engine
// completes them on a worker thread, which encodes the response and
// finishes the RPC.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "server/engine/job.h"
#include "topk/v1/topk.grpc.pb.h"

namespace topk::server {

class TopKService;

// Encodes `output` into `response` (LE int32 indices, optional values,
// timings); returns the bytes written.
int64_t EncodeResponse(const SelectOutput& output, int32_t k, int64_t rows, int64_t total_us,
                       v1::SelectResponse& response);

// gRPC's status for an absl::Status (same code numbers).
grpc::Status ToGrpcStatus(const absl::Status& status);

// Creates the reactor of one unary Select (raw bytes in and out: see
// raw_select.h); it deletes itself in OnDone.
grpc::ServerUnaryReactor* StartUnarySelect(TopKService& service,
                                           grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response);

// Creates the reactor of one SelectStream; it deletes itself in OnDone.
grpc::ServerReadReactor<v1::SelectChunk>* StartStreamSelect(TopKService& service,
                                                            grpc::CallbackServerContext* context,
                                                            v1::SelectResponse* response);

}  // namespace topk::server
