// The topk-server process minus its flags, and the composition root of the
// request path: it creates the backends (server/backends/backend_factory.h),
// hands them to the engine, and puts the transport (service, metrics port,
// health, reflection) on top; it also owns graceful shutdown. Tests and
// benchmarks run it in-process.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/backends/backend_factory.h"
#include "server/engine/channel_registry.h"
#include "server/engine/engine.h"
#include "server/transport/call_tracker.h"
#include "server/transport/metrics.h"
#include "server/transport/region_service.h"

namespace grpc {
class Server;
}  // namespace grpc
namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace topk::server {

class TopKService;
class ServerTlsCredentials;

// The defaults are the product's: topk-server's flags take theirs from here
// (and from BackendOptions, EngineOptions and RequestLimits).
struct ServerOptions {
  // host:port; port 0 picks a free port (see Server::port()). A comma-
  // separated list serves on each, e.g. "127.0.0.1:50051,unix:/run/topk.sock"
  // (a unix socket for co-located clients alongside TCP).
  std::string listen = "127.0.0.1:50051";
  // host:port of the Prometheus text endpoint (/metrics); empty: off.
  std::string metrics_listen = "127.0.0.1:9464";
  // PEM files; both set: TLS, neither: plaintext.
  std::string tls_cert;
  std::string tls_key;
  // PEM bundle of the roots client certificates must chain to: set, every
  // TCP listener requires and verifies a client certificate at the
  // handshake (mutual TLS); unix sockets do not (their file permissions
  // govern them). Needs tls_cert and tls_key.
  std::string tls_client_ca;
  // How often the three TLS files are re-read: a changed set that checks
  // out serves new handshakes within this + 1 s (open connections keep
  // theirs); one that does not is logged and the set in service kept.
  absl::Duration tls_reload_interval = absl::Seconds(10);
  int64_t max_recv_message_bytes = int64_t{64} << 20;
  // Holds the inline answer to a full request: max_rows x max_k x 4 bytes of
  // indices, 64 MiB at the defaults (with values about twice that: such a
  // request is refused alone, naming this flag). Answers written into an
  // output region do not travel, and need none of it.
  int64_t max_send_message_bytes = int64_t{128} << 20;
  // 0 leaves gRPC's default.
  int64_t keepalive_time_ms = 0;
  int64_t keepalive_timeout_ms = 0;
  int64_t max_connection_idle_ms = 0;
  int64_t max_connection_age_ms = 0;
  int64_t max_connection_age_grace_ms = 0;
  bool enable_echo = false;
  bool enable_reflection = true;
  RegionOptions regions;
  // After a burst of large requests, return the freed heap to the OS once
  // the server holds no request bytes for a second (RSS falls back).
  bool release_memory_when_idle = true;
  // Memory budget and stream bounds (on_idle_after_burst is set by Start).
  CallLimits calls;
  // Channels (docs/channels.md): served with --enable_regions.
  ChannelLimits channels;
  BackendOptions backends;
  EngineOptions engine;
  // When no usable device is left (a call's sticky error, or the engine's
  // device probe): also shut down as on SIGTERM (lame duck, then exit), so
  // that an orchestrator restarts the server; under MPS the daemon admits no
  // new client until every client of the faulted GPU has exited. topk-server
  // sets it (--exit_on_device_lost, default true); in-process servers keep
  // serving NOT_SERVING.
  bool exit_on_device_lost = false;
};

// The service name clients probe with grpc.health.v1 (the empty name
// reports the same status).
inline constexpr char kServiceName[] = "topk.v1.TopK";

// The version topk-server reports (GetServerInfo, --version, build info).
const char* ServerVersion();

// Checks options that would otherwise abort or fail later (sizes that cannot
// be allocated, limits gRPC cannot represent, an answer that can never fit
// the send limit); the message names the flag. Start() calls it.
absl::Status ValidateServerOptions(const ServerOptions& options);

class Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options);
  ~Server();  // Shutdown(absl::ZeroDuration()) unless already shut down

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The bound port of the first TCP address (0 when only unix sockets).
  int port() const { return port_; }
  // "127.0.0.1:PORT" (the first TCP listen host with the bound port), or
  // the first address when the server listens on unix sockets only.
  std::string address() const;
  // Bound metrics port, or 0 when off.
  int metrics_port() const { return metrics_port_; }

  // Lame duck, then shutdown: health NOT_SERVING, new Select calls refused
  // with UNAVAILABLE, streams idle for a second ended; the calls in flight
  // (uploads included) get up to `deadline` to finish and are cancelled
  // after it; then gRPC stops (open Health.Watch streams do not hold it) and
  // the workers stop.
  void Shutdown(absl::Duration deadline);
  // Ends the wait of a Shutdown in progress now (a second SIGTERM); safe
  // from any thread.
  void Hurry();

  Engine& engine() { return *engine_; }
  Metrics& metrics() { return *metrics_; }

 private:
  Server() = default;
  void SetServing(bool serving);
  // NOT_SERVING (once), and the shutdown signal with exit_on_device_lost;
  // from any thread (a reactor's, or the engine's device probe).
  void OnDeviceLost();

  std::string host_;
  int port_ = 0;
  int metrics_port_ = 0;
  bool shut_down_ = false;
  bool exit_on_device_lost_ = false;
  std::atomic<bool> device_lost_{false};
  std::atomic<bool> started_{false};  // the gRPC server (and its health service) exists
  std::unique_ptr<Engine> engine_;
  // After the engine (its executors run on the engine's devices), before
  // the service that hands it calls.
  std::unique_ptr<ChannelRegistry> channels_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<TopKService> service_;
  // Outlives the gRPC server whose listeners use it.
  std::unique_ptr<ServerTlsCredentials> tls_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace topk::server
