// Protobuf messages to and from gRPC byte buffers, for the methods served raw.
// gRPC's generated handlers answer an unparseable request with a bare
// UNIMPLEMENTED and a stream's unparseable message as its clean end; parsing
// here lets the service say what was wrong (INVALID_ARGUMENT).
#pragma once

#include "absl/status/status.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"

namespace topk::server {

// Parses `buffer` into `message`; INVALID_ARGUMENT naming the message type
// when the bytes are not one (which includes a string that is not UTF-8).
absl::Status ParseMessage(const grpc::ByteBuffer& buffer, google::protobuf::MessageLite& message);

// Serializes `message` into `buffer`.
absl::Status SerializeMessage(const google::protobuf::MessageLite& message,
                              grpc::ByteBuffer& buffer);

}  // namespace topk::server
