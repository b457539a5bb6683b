// An inline Select whose score bytes are never copied on this side: the
// SelectRequest is encoded by hand around the caller's rows, each row's
// valid prefix one slice of the message, so gRPC gathers the wire message
// from the rows where they lie. (Client::Select serializes a protobuf that
// holds a packed copy of them: for 32 MB of rows, one copy more per call.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "grpcpp/generic/generic_stub.h"
#include "topk/client/client.h"

namespace topk::client::c_api {

struct GatheredRows {
  absl::Span<const void* const> rows;  // row r's first lengths[r] elements
  absl::Span<const int32_t> lengths;   // each >= 0 (checked by the caller)
  size_t element_bytes = 4;
  v1::ScoreType dtype = v1::SCORE_TYPE_FP32;
};

// The SelectRequest as slices: a head (k, options, the rows' header), each
// row's bytes where they are, a tail (lengths, dtype, request id); `head` and
// `tail` hold the encoded parts and, like the rows, must outlive the buffer.
grpc::ByteBuffer EncodeGathered(int32_t k, const GatheredRows& rows, const CallOptions& options,
                                std::string& head, std::string& tail);

absl::StatusOr<SelectResult> SelectGathered(grpc::GenericStub& stub, int32_t k,
                                            const GatheredRows& rows, const CallOptions& options);

}  // namespace topk::client::c_api
