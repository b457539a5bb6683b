// The C ABI's clients, sessions and region registration
// (topk/client/topk_client_c.h): thin wrappers over Client and
// RegionSession that check their C arguments and name the one at fault.
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "c_status.h"
#include "grpcpp/channel.h"  // Channel is a ChannelInterface (client.h only declares it)
#include "handles.h"
#include "topk/client/topk_client_c.h"

namespace {

using topk::client::c_api::Guarded;
using topk::client::c_api::Refused;

const char* OrEmpty(const char* text) { return text != nullptr ? text : ""; }

absl::Status NeedSession(const topk_rpc_session* session) {
  return session == nullptr ? Refused("session", "NULL") : absl::OkStatus();
}

absl::Status NeedName(const char* name) {
  if (name == nullptr || *name == '\0') return Refused("name", "NULL or empty");
  return absl::OkStatus();
}

absl::Status NeedHandle(const void* handle, size_t handle_bytes) {
  if (handle == nullptr && handle_bytes > 0) return Refused("handle", "NULL with bytes > 0");
  return absl::OkStatus();
}

topk::client::GpuId Gpu(const char* uuid, int32_t ordinal) {
  return {.uuid = OrEmpty(uuid), .ordinal = ordinal};
}

}  // namespace

extern "C" {

int32_t topk_rpc_abi_version(void) { return TOPK_RPC_ABI_VERSION; }

int32_t topk_rpc_client_open(const topk_rpc_client_options* options, topk_rpc_client** client,
                             char* message, size_t message_bytes) {
  return topk_rpc_client_open_tls(options, nullptr, client, message, message_bytes);
}

int32_t topk_rpc_client_open_tls(const topk_rpc_client_options* options,
                                 const topk_rpc_tls_options* tls, topk_rpc_client** client,
                                 char* message, size_t message_bytes) {
  return Guarded("topk_rpc_client_open", message, message_bytes, [&]() -> absl::Status {
    if (client == nullptr) return Refused("client", "NULL (where the handle goes)");
    *client = nullptr;
    if (options == nullptr) return Refused("options", "NULL");
    if (options->target == nullptr || *options->target == '\0') {
      return Refused("options.target", "NULL or empty");
    }
    topk::client::ClientOptions wanted{.target = options->target};
    wanted.max_send_message_bytes = options->max_send_message_bytes;
    wanted.max_receive_message_bytes = options->max_receive_message_bytes;
    wanted.load_balancing_policy = OrEmpty(options->load_balancing_policy);
    if (tls != nullptr) {
      wanted.tls = true;
      wanted.root_certs_pem = OrEmpty(tls->root_certs_pem);
      wanted.client_cert_pem = OrEmpty(tls->cert_chain_pem);
      wanted.client_key_pem = OrEmpty(tls->private_key_pem);
      wanted.tls_server_name = OrEmpty(tls->server_name);
      if (wanted.client_cert_pem.empty() != wanted.client_key_pem.empty()) {
        return Refused(
            wanted.client_cert_pem.empty() ? "tls.cert_chain_pem" : "tls.private_key_pem",
            "NULL or empty while the other is set (the client's certificate and key "
            "go together)");
      }
    }
    auto connected = topk::client::Client::Connect(wanted);
    if (!connected.ok()) return connected.status();
    auto handle = std::make_unique<topk_rpc_client>();
    handle->client = *std::move(connected);
    handle->generic = std::make_unique<grpc::GenericStub>(handle->client->channel());
    *client = handle.release();
    return absl::OkStatus();
  });
}

void topk_rpc_client_close(topk_rpc_client* client) { delete client; }

int32_t topk_rpc_session_open(topk_rpc_client* client, int32_t call_path,
                              topk_rpc_session** session, char* message, size_t message_bytes) {
  return Guarded("topk_rpc_session_open", message, message_bytes, [&]() -> absl::Status {
    if (session == nullptr) return Refused("session", "NULL (where the handle goes)");
    *session = nullptr;
    if (client == nullptr) return Refused("client", "NULL");
    if (call_path != TOPK_RPC_CALL_PIPELINE && call_path != TOPK_RPC_CALL_UNARY) {
      return Refused("call_path", absl::StrCat(call_path,
                                               " is neither TOPK_RPC_CALL_PIPELINE (0) "
                                               "nor TOPK_RPC_CALL_UNARY (1)"));
    }
    auto opened = topk::client::RegionSession::Open(
        *client->client, call_path == TOPK_RPC_CALL_UNARY ? topk::client::CallPath::kUnary
                                                          : topk::client::CallPath::kStream);
    if (!opened.ok()) return opened.status();
    auto handle = std::make_unique<topk_rpc_session>();
    handle->session = *std::move(opened);
    *session = handle.release();
    return absl::OkStatus();
  });
}

void topk_rpc_session_close(topk_rpc_session* session) {
  // The session's destructor ends its stream, which releases its regions;
  // it does not throw (the stream is drained, errors dropped).
  delete session;
}

const char* topk_rpc_session_id(const topk_rpc_session* session) {
  return session != nullptr ? session->session->id().c_str() : "";
}

int32_t topk_rpc_register_shm(topk_rpc_session* session, const char* name, const char* shm_name,
                              uint64_t offset, uint64_t byte_size, char* message,
                              size_t message_bytes) {
  return Guarded("topk_rpc_register_shm", message, message_bytes, [&]() -> absl::Status {
    if (auto s = NeedSession(session); !s.ok()) return s;
    if (auto s = NeedName(name); !s.ok()) return s;
    if (shm_name == nullptr) return Refused("shm_name", "NULL");
    return session->session->RegisterShm(name, shm_name, offset, byte_size);
  });
}

int32_t topk_rpc_register_cuda_ipc(topk_rpc_session* session, const char* name,
                                   const void* ipc_handle, size_t handle_bytes, uint64_t offset,
                                   uint64_t byte_size, const char* gpu_uuid, int32_t gpu_ordinal,
                                   char* message, size_t message_bytes) {
  return Guarded("topk_rpc_register_cuda_ipc", message, message_bytes, [&]() -> absl::Status {
    if (auto s = NeedSession(session); !s.ok()) return s;
    if (auto s = NeedName(name); !s.ok()) return s;
    if (auto s = NeedHandle(ipc_handle, handle_bytes); !s.ok()) return s;
    // The server checks the handle's size and the range (docs/regions.md).
    return session->session->RegisterCudaIpc(
        name, absl::string_view(static_cast<const char*>(ipc_handle), handle_bytes), offset,
        byte_size, Gpu(gpu_uuid, gpu_ordinal));
  });
}

int32_t topk_rpc_register_cuda_event(topk_rpc_session* session, const char* name,
                                     const void* ipc_event_handle, size_t handle_bytes,
                                     const char* gpu_uuid, int32_t gpu_ordinal, char* message,
                                     size_t message_bytes) {
  return Guarded("topk_rpc_register_cuda_event", message, message_bytes, [&]() -> absl::Status {
    if (auto s = NeedSession(session); !s.ok()) return s;
    if (auto s = NeedName(name); !s.ok()) return s;
    if (auto s = NeedHandle(ipc_event_handle, handle_bytes); !s.ok()) return s;
    return session->session->RegisterCudaEvent(
        name, absl::string_view(static_cast<const char*>(ipc_event_handle), handle_bytes),
        Gpu(gpu_uuid, gpu_ordinal));
  });
}

int32_t topk_rpc_unregister(topk_rpc_session* session, const char* name, char* message,
                            size_t message_bytes) {
  return Guarded("topk_rpc_unregister", message, message_bytes, [&]() -> absl::Status {
    if (auto s = NeedSession(session); !s.ok()) return s;
    if (auto s = NeedName(name); !s.ok()) return s;
    return session->session->Unregister(name);
  });
}

int32_t topk_rpc_unregister_all(topk_rpc_session* session, int32_t* count, char* message,
                                size_t message_bytes) {
  return Guarded("topk_rpc_unregister_all", message, message_bytes, [&]() -> absl::Status {
    if (auto s = NeedSession(session); !s.ok()) return s;
    absl::StatusOr<int> released = session->session->UnregisterAll();
    if (!released.ok()) return released.status();
    if (count != nullptr) *count = *released;
    return absl::OkStatus();
  });
}

}  // extern "C"
