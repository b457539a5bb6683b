#include "server/transport/raw_messages.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace topk::server {

absl::Status ParseMessage(const grpc::ByteBuffer& buffer, google::protobuf::MessageLite& message) {
  // gRPC's reader only reads; its constructor wants a non-const pointer.
  grpc::ProtoBufferReader reader(const_cast<grpc::ByteBuffer*>(&buffer));
  if (!message.ParseFromZeroCopyStream(&reader)) {
    return absl::InvalidArgumentError(
        absl::StrCat("request: not a valid ", message.GetTypeName(),
                     " (unparseable, or a string field that is not UTF-8)"));
  }
  return absl::OkStatus();
}

absl::Status SerializeMessage(const google::protobuf::MessageLite& message,
                              grpc::ByteBuffer& buffer) {
  bool own_buffer = false;
  const grpc::Status status = grpc::SerializationTraits<google::protobuf::MessageLite>::Serialize(
      message, &buffer, &own_buffer);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("response: ", status.error_message()));
  }
  return absl::OkStatus();
}

}  // namespace topk::server
