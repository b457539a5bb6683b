// The C ABI's opaque handles: what a topk_rpc_client and a topk_rpc_session
// hold on the C++ side (topk/client/client.h, regions.h).
#pragma once

#include <memory>

#include "grpcpp/generic/generic_stub.h"
#include "topk/client/client.h"
#include "topk/client/regions.h"
#include "topk/v1/topk.pb.h"

struct topk_rpc_client {
  std::unique_ptr<topk::client::Client> client;
  // Inline selects go through it as raw messages (gathered_select.h).
  std::unique_ptr<grpc::GenericStub> generic;
};

struct topk_rpc_session {
  std::unique_ptr<topk::client::RegionSession> session;
};
