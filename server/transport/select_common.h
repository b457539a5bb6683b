// What every Select path (unary, pipelined) shares: turning one serialized
// SelectRequest into a validated SelectInput, and turning the engine's
// answer into a response, counted once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"
#include "server/engine/select_job.h"
#include "server/transport/raw_select.h"
#include "server/transport/region_service.h"
#include "server/transport/select_reactors.h"
#include "topk/v1/topk.pb.h"

namespace topk::server {

// How one request ended: what its reactor counts, once.
struct Outcome {
  absl::StatusCode code = absl::StatusCode::kOk;
  int64_t rows = 0;
  int64_t bytes_out = 0;
  SelectTimings timings;
  int64_t total_us = 0;
  int64_t prepare_us = 0;
};

// Counts `outcome` in the metrics (a success with its timings, or an error
// by code).
void Record(const SelectContext& select, const Outcome& outcome);

// Logs a failed request (debug), notes its code in `outcome` and produces its
// RPC status. A device failure that left no usable device is reported once
// more, for health.
grpc::Status Fail(const SelectContext& select, const absl::Status& status,
                  const std::string& request_id, Outcome& outcome);

// What every path does when the engine is done with a request: encode,
// refuse an answer gRPC could not send, and produce the request's status.
grpc::Status FinishSelect(const SelectContext& select, const absl::Status& status,
                          const SelectOutput& output, const SelectInput& input, int64_t start_us,
                          int64_t submitted_us, const std::string& request_id,
                          v1::SelectResponse& response, Outcome& outcome);

// One decoded Select request and everything its SelectInput points into
// (the request's own buffer, for inline rows, is the caller's and must
// outlive it too).
struct PreparedSelect {
  RawSelectRequest raw;
  std::optional<ByteBufferRows> rows;
  RegionBinding regions;
  SelectInput input;
};

// Decodes and checks `request` (inline rows, or references bound to leased
// regions) into `out.input`, ready for the engine. The error names the field
// (and row) at fault.
// `sessions`: optional, the calling stream's SessionCache.
absl::Status PrepareSelect(const SelectContext& select, grpc::CallbackServerContext* context,
                           const grpc::ByteBuffer* request, PreparedSelect& out,
                           SessionCache* sessions = nullptr);

absl::Status ClientGone();

}  // namespace topk::server
