#include "server/server.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <new>
#include <stdexcept>

#include "absl/memory/memory.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "prometheus/exposer.h"
#include "server/process_tuning.h"
#include "server/tls_credentials.h"
#include "server/transport/service.h"
#include "spdlog/spdlog.h"

#ifndef TOPK_VERSION
#define TOPK_VERSION "0.0.0"
#endif

namespace topk::server {
namespace {

// "host:port", "[v6]:port" or "unix:path": the port must be 0..65535 (gRPC
// would take 99999 modulo 65536 without a word).
absl::Status CheckListenAddress(const std::string& address, absl::string_view flag) {
  if (absl::StartsWith(address, "unix:")) return absl::OkStatus();
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(absl::string_view(address).substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", address, ": expected host:port with a port in 0..65535"));
  }
  return absl::OkStatus();
}

// Physical memory of this machine, or 0 when unknown.
int64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : 0;
}

std::string GiB(long double bytes) { return absl::StrCat(static_cast<double>(bytes / (1 << 30))); }

// TLS when --tls_cert and --tls_key are set (checked and watched for
// rotation: tls_credentials.h); nullptr for plaintext.
absl::StatusOr<std::unique_ptr<ServerTlsCredentials>> Tls(const ServerOptions& options) {
  if (options.tls_cert.empty() && options.tls_key.empty()) {
    if (!options.tls_client_ca.empty()) {
      return absl::InvalidArgumentError(
          "--tls_client_ca needs --tls_cert and --tls_key (mutual TLS is TLS first)");
    }
    return nullptr;
  }
  if (options.tls_cert.empty() || options.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  return ServerTlsCredentials::Create(
      {.cert = options.tls_cert, .key = options.tls_key, .client_ca = options.tls_client_ca},
      options.tls_reload_interval);
}

void SetIntArg(grpc::ServerBuilder& builder, const char* name, int64_t value) {
  if (value > 0) builder.AddChannelArgument(name, static_cast<int>(value));
}

std::string MiB(int64_t bytes) { return absl::StrCat(bytes >> 20, " MiB"); }

// What an operator checks first: what serves, on what, within which limits,
// and the memory that took at start.
void LogStartupSummary(const ServerOptions& options, const Engine& engine) {
  const RequestLimits& limits = engine.limits();
  for (const EngineDevice& device : engine.devices()) {
    spdlog::info(
        "device {}: {}{}, {} workers{}",
        device.description.ordinal < 0 ? "cpu" : std::to_string(device.description.ordinal),
        device.description.name,
        device.description.uuid.empty() ? "" : " (" + device.description.uuid + ")", device.workers,
        device.description.memory_bytes > 0
            ? absl::StrCat(", ", MiB(device.description.memory_bytes), " of memory")
            : "");
  }
  int64_t workers = 0;
  for (const EngineDevice& device : engine.devices()) workers += device.workers;
  const int64_t output_bytes = limits.max_rows * limits.max_k * 8 * workers;
  const bool gpu = engine.backend_name() == "cuda";
  spdlog::info(
      "limits: max_k {}, max_rows {}, max_width {}, max_batch_bytes {}, queue_depth {} per "
      "device, coalescing {} us, messages {} in / {} out, {} of requests in flight, {} streams "
      "(idle {}, {} "
      "chunks)",
      limits.max_k, limits.max_rows, limits.max_width, MiB(limits.max_batch_bytes),
      engine.options().queue_depth, engine.options().max_queue_delay_us,
      MiB(options.max_recv_message_bytes), MiB(options.max_send_message_bytes),
      MiB(options.calls.max_inflight_bytes), options.calls.max_streams,
      absl::FormatDuration(options.calls.stream_idle_timeout), options.calls.max_stream_chunks);
  spdlog::info("memory at start: {} of host output buffers, {} of {} staging ({} workers)",
               MiB(output_bytes), MiB(limits.max_batch_bytes * workers),
               gpu ? "pinned and as much device" : "host (resident as requests touch it)", workers);
}

// Creates the backends and the engine; an allocation the limits make
// impossible is an error that names them, not an abort.
absl::StatusOr<std::unique_ptr<Engine>> CreateEngine(const ServerOptions& options,
                                                     std::function<void()> on_no_usable_device) {
  try {
    absl::StatusOr<Backends> backends = CreateBackends(options.backends);
    if (!backends.ok()) return backends.status();
    EngineOptions engine = options.engine;
    engine.on_no_usable_device = std::move(on_no_usable_device);
    return Engine::Create(engine, *std::move(backends));
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  return absl::ResourceExhaustedError(
      "cannot allocate the workers' buffers for these limits; lower --max_rows, --max_k, "
      "--max_batch_bytes or --workers");
}

}  // namespace

const char* ServerVersion() { return TOPK_VERSION; }

absl::Status ValidateServerOptions(const ServerOptions& options) {
  const RequestLimits& limits = options.engine.limits;
  constexpr int64_t kGrpcMaxMessage = std::numeric_limits<int>::max();
  auto out_of_range = [](absl::string_view flag, int64_t value, int64_t low, int64_t high) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", value, " is out of range [", low, ", ", high, "]"));
  };
  struct Range {
    absl::string_view flag;
    int64_t value, low, high;
  };
  const Range ranges[] = {
      {"--max_k", limits.max_k, 1, int64_t{1} << 20},
      {"--max_rows", limits.max_rows, 1, int64_t{1} << 24},
      {"--max_width", limits.max_width, 1, std::numeric_limits<int32_t>::max()},
      {"--max_batch_bytes", limits.max_batch_bytes, 4, int64_t{1} << 40},
      {"--queue_depth", options.engine.queue_depth, 1, int64_t{1} << 20},
      {"--max_queue_delay_us", options.engine.max_queue_delay_us, 0, 1'000'000},
      {"--workers", options.backends.workers, 0, 256},
      {"--cpu_threads", options.backends.cpu_threads, 0, 4096},
      {"--copy_threads", options.backends.copy_threads, -1, 256},
      {"--max_recv_message_bytes", options.max_recv_message_bytes, 1, kGrpcMaxMessage},
      {"--max_send_message_bytes", options.max_send_message_bytes, 1, kGrpcMaxMessage},
      {"--max_inflight_bytes", options.calls.max_inflight_bytes, 0, int64_t{1} << 50},
      {"--max_streams", options.calls.max_streams, 0, 1 << 20},
      {"--max_stream_chunks", options.calls.max_stream_chunks, 0, int64_t{1} << 40},
  };
  for (const Range& r : ranges) {
    if (r.value < r.low || r.value > r.high) return out_of_range(r.flag, r.value, r.low, r.high);
  }
  if (options.calls.stream_idle_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--stream_idle_timeout must be positive");
  }
  for (absl::string_view address : absl::StrSplit(options.listen, ',', absl::SkipEmpty())) {
    if (absl::Status s = CheckListenAddress(std::string(address), "--listen"); !s.ok()) return s;
  }
  if (!options.metrics_listen.empty()) {
    if (absl::Status s = CheckListenAddress(options.metrics_listen, "--metrics_listen"); !s.ok()) {
      return s;
    }
  }
  // The smallest inline answer a full request can get: M x K int32 indices
  // (values double it; that is refused per request, with a message, when
  // asked). An answer written into an output region is not sent, but a
  // request by reference may still ask for it inline.
  const int64_t index_bytes = limits.max_rows * limits.max_k * int64_t{4};
  constexpr int64_t kResponseOverhead = 1024;
  if (index_bytes + kResponseOverhead > options.max_send_message_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_send_message_bytes=", options.max_send_message_bytes,
        " cannot hold the answer to a ", "full request: --max_rows x --max_k x 4 = ", index_bytes,
        " bytes; raise it or lower --max_rows or --max_k"));
  }
  // In flight are the bytes of messages and stream chunks: inline rows,
  // bounded by --max_batch_bytes. Rows by reference stay in the client's
  // memory and hold none of it.
  if (options.calls.max_inflight_bytes > 0 &&
      options.calls.max_inflight_bytes <
          std::max(limits.max_batch_bytes,
                   std::min(options.max_recv_message_bytes, limits.max_batch_bytes + (1 << 20)))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_inflight_bytes=", options.calls.max_inflight_bytes,
        " is below one full request (--max_batch_bytes = ", limits.max_batch_bytes, ")"));
  }
  // Host buffers every worker allocates (and touches) at start.
  const int64_t memory = PhysicalMemoryBytes();
  if (memory > 0) {
    const int workers = options.backends.workers > 0
                            ? options.backends.workers
                            : std::max(kDefaultCpuWorkers, kDefaultWorkersPerGpu);
    const long double per_worker = static_cast<long double>(limits.max_rows) * limits.max_k * 8.0L +
                                   static_cast<long double>(limits.max_rows) * 16.0L;
    const long double total = per_worker * workers;
    if (total > memory) {
      return absl::ResourceExhaustedError(
          absl::StrCat("--max_rows x --max_k x 8 bytes x ", workers, " workers = ", GiB(total),
                       " GiB of output buffers exceed this machine's ", GiB(memory),
                       " GiB; lower --max_rows, --max_k or --workers"));
    }
    if (limits.max_batch_bytes > memory) {
      return absl::ResourceExhaustedError(absl::StrCat("--max_batch_bytes=", limits.max_batch_bytes,
                                                       " exceeds this machine's ", GiB(memory),
                                                       " GiB of memory"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  if (absl::Status valid = ValidateServerOptions(options); !valid.ok()) return valid;
  // protobuf logs every string that is not UTF-8 at ERROR: a client could
  // flood the log with them. The request is refused with the reason anyway;
  // keep protobuf's lines for --log_level=debug.
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char* file, int line, const std::string& message) {
        spdlog::debug("protobuf {}:{}: {}", file, line, message);
      });
  auto server = absl::WrapUnique(new Server());
  server->exit_on_device_lost_ = options.exit_on_device_lost;
  Server* lost = server.get();
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      CreateEngine(options, [lost] { lost->OnDeviceLost(); });
  if (!engine.ok()) return engine.status();
  server->engine_ = *std::move(engine);
  server->metrics_ = std::make_unique<Metrics>(*server->engine_, TOPK_VERSION);
  const Engine& eng = *server->engine_;
  if (eng.backend_name() == "cpu" && options.backends.backend != "cpu") {
    spdlog::warn("*** NO GPU: serving on the CPU backend *** ({})", eng.backend_reason());
  } else {
    spdlog::info("backend {}: {}", eng.backend_name(), eng.backend_reason());
  }
  if (eng.backend_name() != "cpu") {
    spdlog::info("MPS: {}", eng.mps() ? "this server's GPU contexts are MPS clients"
                                      : "not under MPS (co-located processes time-slice the GPU; "
                                        "docs/channels.md)");
  }
  if (options.regions.enabled) {
    server->channels_ = std::make_unique<ChannelRegistry>(server->engine_.get(), options.channels);
  }

  absl::StatusOr<std::unique_ptr<ServerTlsCredentials>> tls = Tls(options);
  if (!tls.ok()) return tls.status();
  server->tls_ = *std::move(tls);
  // A unix socket is governed by its file permissions: TLS when TLS is on,
  // but no client certificate asked for there.
  const auto credentials_for = [&server](absl::string_view address) {
    if (server->tls_ == nullptr) return grpc::InsecureServerCredentials();
    return absl::StartsWith(address, "unix:") ? server->tls_->local() : server->tls_->network();
  };

  Server* raw = server.get();
  CallLimits call_limits = options.calls;
  if (options.release_memory_when_idle) {
    call_limits.on_idle_after_burst = [] {
      const int64_t before = ResidentBytes();
      ReleaseFreeHeapMemory();
      spdlog::debug("idle: returned freed heap memory to the OS (RSS {} -> {} MiB)", before >> 20,
                    ResidentBytes() >> 20);
    };
  }
  server->service_ = std::make_unique<TopKService>(
      server->engine_.get(), server->metrics_.get(),
      ServiceConfig{.version = TOPK_VERSION,
                    .enable_echo = options.enable_echo,
                    .max_recv_message_bytes = options.max_recv_message_bytes,
                    .max_send_message_bytes = options.max_send_message_bytes,
                    .on_device_lost = [raw] { raw->OnDeviceLost(); },
                    .regions = options.regions,
                    .call_limits = std::move(call_limits),
                    .channels = server->channels_.get()});

  grpc::EnableDefaultHealthCheckService(true);
  if (options.enable_reflection) grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const std::vector<std::string> addresses = absl::StrSplit(options.listen, ',', absl::SkipEmpty());
  std::vector<int> bound_ports(addresses.size(), 0);
  for (size_t i = 0; i < addresses.size(); ++i) {
    builder.AddListeningPort(addresses[i], credentials_for(addresses[i]), &bound_ports[i]);
  }
  // One server per port: with SO_REUSEPORT a second server would start on a
  // busy port and silently take part of its traffic.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
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
  const auto cannot_listen = [&options](absl::string_view address) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", address,
        ": the port is in use by another process or the host is not an address of this machine",
        options.tls_cert.empty() ? ""
                                 : " (or --tls_cert and --tls_key are not a matching PEM pair)"));
  };
  if (server->grpc_server_ == nullptr || addresses.empty()) {
    return cannot_listen(options.listen);
  }
  for (size_t i = 0; i < addresses.size(); ++i) {
    if (bound_ports[i] == 0) return cannot_listen(addresses[i]);
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
  server->started_.store(true, std::memory_order_release);
  server->SetServing(eng.usable() && !server->device_lost_.load());
  LogStartupSummary(options, eng);
  spdlog::info("topk-server {} listening on {} ({} backend, {} device(s), {})", TOPK_VERSION,
               server->address(), eng.backend_name(), eng.devices().size(),
               server->tls_ == nullptr                        ? "plaintext"
               : server->tls_->requires_client_certificates() ? "mutual TLS on TCP"
                                                              : "TLS");
  return server;
}

Server::~Server() { Shutdown(absl::ZeroDuration()); }

std::string Server::address() const { return port_ == 0 ? host_ : absl::StrCat(host_, ":", port_); }

void Server::OnDeviceLost() {
  if (device_lost_.exchange(true)) return;
  spdlog::critical("every device is unusable: health NOT_SERVING{}",
                   exit_on_device_lost_ ? "; shutting down (--exit_on_device_lost) so that the "
                                          "server can be restarted on a working context"
                                        : "");
  if (started_.load(std::memory_order_acquire)) SetServing(false);
  // The process's own SIGTERM path: lame duck, the drain, then exit.
  if (exit_on_device_lost_) kill(getpid(), SIGTERM);
}

void Server::SetServing(bool serving) {
  grpc::HealthCheckServiceInterface* health = grpc_server_->GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus(serving);  // the overall ("") status
  health->SetServingStatus(kServiceName, serving);
}

void Server::Hurry() {
  if (service_ != nullptr) service_->Hurry();
}

void Server::Shutdown(absl::Duration deadline) {
  if (shut_down_) return;
  shut_down_ = true;
  if (grpc_server_ != nullptr) {
    spdlog::info(
        "lame duck: health NOT_SERVING, new calls refused; {} call(s) in flight have {} "
        "to finish",
        service_->calls().calls_in_flight(), absl::FormatDuration(deadline));
    // Health first, so load balancers stop routing here while we drain;
    // Shutdown() of the health service also freezes it at NOT_SERVING.
    if (grpc::HealthCheckServiceInterface* health = grpc_server_->GetHealthCheckService()) {
      health->Shutdown();
    }
    // Region sessions are streams that stay open by design: end them, or
    // they would hold the drain until its deadline. Requests in flight keep
    // their regions until they finish.
    service_->EndSessions();
    // The listener stays open while we drain, so a late client is told
    // UNAVAILABLE (retry elsewhere) instead of finding a closed port.
    if (service_->Drain(absl::Now() + deadline)) {
      spdlog::info("every call in flight finished");
    } else {
      spdlog::warn("{} call(s) still in flight: cancelling them",
                   service_->calls().calls_in_flight());
    }
    // What is left are our cancelled calls, refused calls and Health.Watch
    // streams: waiting would only hold the exit.
    grpc_server_->Shutdown(absl::ToChronoTime(absl::Now()));
  }
  if (channels_ != nullptr) channels_->Stop();
  if (engine_ != nullptr) engine_->Stop();
  exposer_.reset();
  spdlog::info("stopped");
}

}  // namespace topk::server
