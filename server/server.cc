#include "server/server.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/memory/memory.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "prometheus/exposer.h"
#include "server/transport/service.h"
#include "spdlog/spdlog.h"

#ifndef TOPK_VERSION
#define TOPK_VERSION "0.0.0"
#endif

namespace topk::server {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, ": cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(const ServerOptions& options) {
  if (options.tls_cert.empty() && options.tls_key.empty()) {
    return grpc::InsecureServerCredentials();
  }
  if (options.tls_cert.empty() || options.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  absl::StatusOr<std::string> cert = ReadFile(options.tls_cert, "--tls_cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadFile(options.tls_key, "--tls_key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(ssl);
}

void SetIntArg(grpc::ServerBuilder& builder, const char* name, int64_t value) {
  if (value > 0) builder.AddChannelArgument(name, static_cast<int>(value));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  auto server = absl::WrapUnique(new Server());
  absl::StatusOr<Backends> backends = CreateBackends(options.backends);
  if (!backends.ok()) return backends.status();
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(options.engine, *std::move(backends));
  if (!engine.ok()) return engine.status();
  server->engine_ = *std::move(engine);
  server->metrics_ = std::make_unique<Metrics>(*server->engine_);
  const Engine& eng = *server->engine_;
  if (eng.backend_name() == "cpu" && options.backends.backend != "cpu") {
    spdlog::warn("*** NO GPU: serving on the CPU backend *** ({})", eng.backend_reason());
  } else {
    spdlog::info("backend {}: {}", eng.backend_name(), eng.backend_reason());
  }

  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = Credentials(options);
  if (!credentials.ok()) return credentials.status();

  Server* raw = server.get();
  server->service_ = std::make_unique<TopKService>(
      server->engine_.get(), server->metrics_.get(),
      ServiceConfig{.version = TOPK_VERSION,
                    .enable_echo = options.enable_echo,
                    .max_recv_message_bytes = options.max_recv_message_bytes,
                    .max_send_message_bytes = options.max_send_message_bytes,
                    .on_device_lost =
                        [raw] {
                          spdlog::critical("every device is unusable: health NOT_SERVING");
                          raw->SetServing(false);
                        },
                    .regions = options.regions});

  grpc::EnableDefaultHealthCheckService(true);
  if (options.enable_reflection) grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const std::vector<std::string> addresses = absl::StrSplit(options.listen, ',', absl::SkipEmpty());
  std::vector<int> bound_ports(addresses.size(), 0);
  for (size_t i = 0; i < addresses.size(); ++i) {
    builder.AddListeningPort(addresses[i], *credentials, &bound_ports[i]);
  }
  builder.RegisterService(server->service_.get());
  // gRPC takes int sizes: 2 GiB - 1 at most.
  const auto clamp = [](int64_t bytes) {
    return static_cast<int>(std::clamp<int64_t>(bytes, 0, std::numeric_limits<int>::max()));
  };
  builder.SetMaxReceiveMessageSize(clamp(options.max_recv_message_bytes));
  builder.SetMaxSendMessageSize(clamp(options.max_send_message_bytes));
  SetIntArg(builder, GRPC_ARG_KEEPALIVE_TIME_MS, options.keepalive_time_ms);
  SetIntArg(builder, GRPC_ARG_KEEPALIVE_TIMEOUT_MS, options.keepalive_timeout_ms);
  SetIntArg(builder, GRPC_ARG_MAX_CONNECTION_IDLE_MS, options.max_connection_idle_ms);
  SetIntArg(builder, GRPC_ARG_MAX_CONNECTION_AGE_MS, options.max_connection_age_ms);
  SetIntArg(builder, GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, options.max_connection_age_grace_ms);
  server->grpc_server_ = builder.BuildAndStart();
  if (server->grpc_server_ == nullptr || addresses.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen));
  }
  for (size_t i = 0; i < addresses.size(); ++i) {
    if (bound_ports[i] == 0) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", addresses[i]));
    }
    if (server->port_ == 0 && !absl::StartsWith(addresses[i], "unix")) {
      server->port_ = bound_ports[i];
      server->host_ = addresses[i].substr(0, addresses[i].rfind(':'));
    }
  }
  if (server->port_ == 0) server->host_ = addresses.front();  // unix sockets only

  if (!options.metrics_listen.empty()) {
    try {
      server->exposer_ = std::make_unique<prometheus::Exposer>(options.metrics_listen, 1);
      server->exposer_->RegisterCollectable(server->metrics_->collectable());
      const std::vector<int> ports = server->exposer_->GetListeningPorts();
      server->metrics_port_ = ports.empty() ? 0 : ports.front();
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("--metrics_listen=", options.metrics_listen, ": ", e.what()));
    }
    spdlog::info("metrics: http://{}:{}/metrics",
                 options.metrics_listen.substr(0, options.metrics_listen.rfind(':')),
                 server->metrics_port_);
  }
  server->SetServing(eng.usable());
  spdlog::info("topk-server {} listening on {} ({} backend, {} device(s), {})", TOPK_VERSION,
               server->address(), eng.backend_name(), eng.devices().size(),
               options.tls_cert.empty() ? "plaintext" : "TLS");
  return server;
}

Server::~Server() { Shutdown(absl::ZeroDuration()); }

std::string Server::address() const { return port_ == 0 ? host_ : absl::StrCat(host_, ":", port_); }

void Server::SetServing(bool serving) {
  grpc::HealthCheckServiceInterface* health = grpc_server_->GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus(serving);  // the overall ("") status
  health->SetServingStatus(kServiceName, serving);
}

void Server::Shutdown(absl::Duration deadline) {
  if (shut_down_) return;
  shut_down_ = true;
  if (grpc_server_ != nullptr) {
    spdlog::info("draining: in-flight requests have {} to finish", absl::FormatDuration(deadline));
    // Health first, so load balancers stop routing here while we drain;
    // Shutdown() of the health service also freezes it at NOT_SERVING.
    if (grpc::HealthCheckServiceInterface* health = grpc_server_->GetHealthCheckService()) {
      health->Shutdown();
    }
    // Region sessions are streams that stay open by design: end them, or
    // they would hold the drain until its deadline. Requests in flight keep
    // their regions until they finish.
    if (service_ != nullptr) service_->EndSessions();
    grpc_server_->Shutdown(absl::ToChronoTime(absl::Now() + deadline));
  }
  if (engine_ != nullptr) engine_->Stop();
  exposer_.reset();
  spdlog::info("stopped");
}

}  // namespace topk::server
