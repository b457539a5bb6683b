// The C ABI's opaque handles: what a topk_rpc_client and a topk_rpc_session
// hold on the C++ side (topk/client/client.h, regions.h).
#pragma once

#include <memory>
#include <mutex>

#include "topk/client/client.h"
#include "topk/client/regions.h"
#include "topk/v1/topk.pb.h"

struct topk_rpc_client {
  std::unique_ptr<topk::client::Client> client;
  // An inline request reused from call to call: its score buffer keeps its
  // capacity, so a steady stream of same-sized batches allocates (and
  // faults in) those bytes once, as a caller replaying one prebuilt request
  // does. Taken with try_lock; a concurrent call builds its own.
  std::mutex scratch_mutex;
  topk::v1::SelectRequest scratch;
};

struct topk_rpc_session {
  std::unique_ptr<topk::client::RegionSession> session;
};
