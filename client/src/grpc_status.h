// A gRPC call's status as the client library returns it.
#pragma once

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"

namespace topk::client {

inline absl::Status ToAbsl(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  // grpc::StatusCode and absl::StatusCode share their numbering.
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace topk::client
