// topk-server: flags -> ServerOptions, then serve until SIGTERM/SIGINT and
// drain. The signal handler only writes the signal number to a pipe (async-
// signal-safe); the main thread reads it and drains. A handler rather than
// sigwait: libraries may start threads before main() could block signals, and
// such a thread would take the default action (terminate) instead.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "server/process_tuning.h"
#include "server/server.h"
#include "spdlog/spdlog.h"

namespace {

// Every default is defined once, in the option structs; the flags take them.
const topk::server::ServerOptions& Defaults() {
  static const auto* const defaults = new topk::server::ServerOptions();
  return *defaults;
}

}  // namespace

ABSL_FLAG(std::string, listen, Defaults().listen,
          "host:port to serve gRPC on (port 0: pick a free one), or a comma-separated list that "
          "may include unix:/path sockets. Loopback by default.");
ABSL_FLAG(std::string, metrics_listen, Defaults().metrics_listen,
          "host:port of the Prometheus /metrics endpoint; empty disables it");
ABSL_FLAG(std::string, tls_cert, Defaults().tls_cert,
          "PEM certificate chain; with --tls_key enables TLS");
ABSL_FLAG(std::string, tls_key, Defaults().tls_key, "PEM private key; with --tls_cert enables TLS");
ABSL_FLAG(std::string, tls_client_ca, Defaults().tls_client_ca,
          "PEM bundle of the roots client certificates must chain to: every TCP listener then "
          "requires and verifies a client certificate (mutual TLS; unix sockets do not); needs "
          "--tls_cert and --tls_key");
ABSL_FLAG(absl::Duration, tls_reload_interval, Defaults().tls_reload_interval,
          "how often the TLS files are re-read: new files serve new handshakes within this + 1s, "
          "a set that does not check out is logged and the one in service kept; at least 1s");
ABSL_FLAG(std::string, backend, Defaults().backends.backend,
          "auto | cuda | cpu (auto: CUDA when a GPU is usable)");
ABSL_FLAG(std::string, cuda_devices, absl::StrJoin(Defaults().backends.cuda_devices, ","),
          "comma-separated CUDA ordinals to serve (empty: every usable device)");
ABSL_FLAG(bool, cuda_graphs, Defaults().backends.cuda_graphs,
          "replay one captured CUDA graph per plan bucket");
ABSL_FLAG(int, workers, Defaults().backends.workers,
          "persistent workers per device (0: 2 on the CPU, 4 per GPU)");
ABSL_FLAG(int, cpu_threads, Defaults().backends.cpu_threads,
          "selector threads per CPU worker (0: hardware threads / workers)");
ABSL_FLAG(int, copy_threads, Defaults().backends.copy_threads,
          "staging copy threads shared by the GPU workers (inline rows into pinned memory; "
          "-1: half the cores, at most 16; 0: each worker copies alone)");
ABSL_FLAG(bool, staging_streaming_stores, Defaults().backends.staging_streaming_stores,
          "the staging copy writes pinned memory with streaming (non-temporal) stores "
          "instead of through the caches");
ABSL_FLAG(int, queue_depth, Defaults().engine.queue_depth,
          "requests waiting per device before RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, device_probe_ms, Defaults().engine.device_probe_ms,
          "probe every device's context this often (0: never); a lost one is marked unusable "
          "even while the server is idle");
ABSL_FLAG(bool, exit_on_device_lost, true,
          "shut down (lame duck, then exit) once no usable device is left, so that an "
          "orchestrator restarts the server");
ABSL_FLAG(int64_t, max_queue_delay_us, Defaults().engine.max_queue_delay_us,
          "longest a request waits for compatible requests to share its launch (0: no "
          "coalescing)");
ABSL_FLAG(int, max_k, Defaults().engine.limits.max_k, "largest K accepted");
ABSL_FLAG(int64_t, max_rows, Defaults().engine.limits.max_rows, "most rows in one request");
ABSL_FLAG(int64_t, max_width, Defaults().engine.limits.max_width, "largest row length L_r");
ABSL_FLAG(int64_t, max_batch_bytes, Defaults().engine.limits.max_batch_bytes,
          "largest score payload the server copies for one request (inline rows, host-region "
          "rows a GPU stages; bytes(dtype) * sum(lengths)); sizes staging buffers. Rows by "
          "reference read in place do not count");
ABSL_FLAG(int64_t, max_recv_message_bytes, Defaults().max_recv_message_bytes,
          "largest gRPC message received (use SelectStream beyond it)");
ABSL_FLAG(int64_t, max_send_message_bytes, Defaults().max_send_message_bytes,
          "largest gRPC message sent");
ABSL_FLAG(int64_t, keepalive_time_ms, Defaults().keepalive_time_ms,
          "server keepalive ping interval (0: gRPC default)");
ABSL_FLAG(int64_t, keepalive_timeout_ms, Defaults().keepalive_timeout_ms,
          "keepalive ping ack timeout (0: gRPC default)");
ABSL_FLAG(int64_t, max_connection_idle_ms, Defaults().max_connection_idle_ms,
          "close idle connections after this (0: never)");
ABSL_FLAG(int64_t, max_connection_age_ms, Defaults().max_connection_age_ms,
          "close connections after this age so clients rebalance across replicas (0: never)");
ABSL_FLAG(int64_t, max_connection_age_grace_ms, Defaults().max_connection_age_grace_ms,
          "grace for calls on an aged connection");
ABSL_FLAG(absl::Duration, drain_deadline, absl::Seconds(10),
          "on SIGTERM/SIGINT (lame duck): time in-flight calls get to finish before they are "
          "cancelled; a second signal ends the wait");
ABSL_FLAG(int64_t, max_inflight_bytes, Defaults().calls.max_inflight_bytes,
          "request bytes held at once (messages and stream chunks); beyond it "
          "RESOURCE_EXHAUSTED (0: no bound)");
ABSL_FLAG(int, max_streams, Defaults().calls.max_streams,
          "SelectStream calls open at once; beyond it RESOURCE_EXHAUSTED (0: no bound)");
ABSL_FLAG(absl::Duration, stream_idle_timeout, Defaults().calls.stream_idle_timeout,
          "end a SelectStream that sends nothing for this long (DEADLINE_EXCEEDED)");
ABSL_FLAG(int64_t, max_stream_chunks, Defaults().calls.max_stream_chunks,
          "chunks in one SelectStream (0: no bound)");
ABSL_FLAG(bool, release_memory_when_idle, Defaults().release_memory_when_idle,
          "return freed heap memory to the OS after a burst, once no request bytes are held "
          "for a second (RSS falls back to its base)");
ABSL_FLAG(bool, enable_echo, Defaults().enable_echo, "serve the Echo RPC (transport benchmark)");
ABSL_FLAG(bool, enable_reflection, Defaults().enable_reflection, "serve gRPC server reflection");
ABSL_FLAG(bool, enable_regions, Defaults().regions.enabled,
          "serve the region RPCs and Select by reference (shared memory, CUDA IPC)");
ABSL_FLAG(bool, regions_allow_remote, Defaults().regions.allow_remote,
          "accept region RPCs from peers that are not loopback or unix-socket connections");
ABSL_FLAG(int64_t, max_channels, Defaults().channels.max_channels,
          "most channels open on the server (OpenChannel past it: RESOURCE_EXHAUSTED)");
ABSL_FLAG(int64_t, max_channels_per_session, Defaults().channels.max_channels_per_session,
          "most channels one session may hold open");
ABSL_FLAG(int64_t, channel_spin_us, Defaults().channels.spin_us,
          "how long the channel poller spins after the last call before it naps (one busy core "
          "while channels are in use; a call arriving later waits up to --channel_poll_us)");
ABSL_FLAG(int64_t, channel_poll_us, Defaults().channels.idle_poll_us,
          "the channel poller's nap between looks once idle");
ABSL_FLAG(bool, keep_heap, true,
          "keep freed large buffers resident (no per-request page faults; RSS stays at peak)");
ABSL_FLAG(int, malloc_arenas, topk::server::kDefaultMallocArenas,
          "glibc malloc arenas (0: glibc's default of 8 per core); more arenas mean less lock "
          "sharing between threads and more memory that the idle release cannot return");
ABSL_FLAG(bool, mutex_deadlock_detection, false,
          "keep absl::Mutex's lock-order checking on where the library was built with it (a "
          "debugging aid: it serialises every lock of the process, gRPC's included, on one "
          "global lock and caps the messages/s a server can handle)");
ABSL_FLAG(std::string, log_level, "info",
          "trace | debug | info | warn | error (debug: one line per request)");

namespace {

int shutdown_pipe[2] = {-1, -1};

void OnShutdownSignal(int signal_number) {
  const char byte = static_cast<char>(signal_number);
  [[maybe_unused]] ssize_t n = write(shutdown_pipe[1], &byte, 1);
}

bool InstallShutdownHandler() {
  if (pipe2(shutdown_pipe, O_CLOEXEC) != 0) return false;
  struct sigaction action {};
  action.sa_handler = OnShutdownSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  return sigaction(SIGTERM, &action, nullptr) == 0 && sigaction(SIGINT, &action, nullptr) == 0;
}

int WaitForShutdownSignal() {
  char byte = 0;
  while (read(shutdown_pipe[0], &byte, 1) != 1) {
  }
  return byte;
}

// The byte the main thread writes to wake the second-signal watcher when the
// drain ended on its own.
constexpr char kDrainOver = 0;

// Checks the flags main() reads itself; the server checks the rest.
absl::Status ValidateProcessFlags() {
  const std::string level = absl::GetFlag(FLAGS_log_level);
  if (level != "trace" && level != "debug" && level != "info" && level != "warn" &&
      level != "error") {
    return absl::InvalidArgumentError(
        absl::StrCat("--log_level=", level, ": expected one of trace, debug, info, warn, error"));
  }
  if (absl::GetFlag(FLAGS_drain_deadline) < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--drain_deadline=", absl::FormatDuration(absl::GetFlag(FLAGS_drain_deadline)),
                     " is negative"));
  }
  if (absl::GetFlag(FLAGS_malloc_arenas) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--malloc_arenas=", absl::GetFlag(FLAGS_malloc_arenas),
                     " is negative (0: glibc's default)"));
  }
  return absl::OkStatus();
}

// True when this file defines the flag: what --help lists.
bool IsServerFlag(absl::string_view path) { return absl::EndsWith(path, "server/main.cc"); }

// --help: the usage line and this file's flags, exit status 0. (absl's own
// --help exits 1, and matches flags by the program's source name, which
// "topk-server" is not.)
bool PrintHelpIfAsked(int argc, char** argv) {
  bool asked = false;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    asked = asked || arg == "--help" || arg == "-help" || arg == "-h";
  }
  if (!asked) return false;
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (IsServerFlag(flag->Filename())) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  std::printf("%s\n\nFlags:\n", std::string(absl::ProgramUsageMessage()).c_str());
  for (const absl::CommandLineFlag* flag : flags) {
    std::printf("  --%s (%s); default: %s\n", std::string(flag->Name()).c_str(),
                flag->Help().c_str(), flag->DefaultValue().c_str());
  }
  std::printf("\n--helpfull lists every flag of every library; --version prints the version.\n");
  return true;
}

// --helpon=main and --helpshort list this file's flags; --version prints it.
void ConfigureUsage() {
  absl::FlagsUsageConfig config;
  config.contains_help_flags = IsServerFlag;
  config.contains_helpshort_flags = config.contains_help_flags;
  config.version_string = [] {
    return absl::StrCat("topk-server ", topk::server::ServerVersion(), "\n");
  };
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(
      "topk-server: exact Top-K selection over gRPC (topk.v1.TopK)\n"
      "Usage: topk-server [--listen=HOST:PORT] [--backend=auto|cuda|cpu] [flags]; "
      "--help lists the flags");
}

absl::StatusOr<std::vector<int>> ParseOrdinals(const std::string& text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int d = 0;
    if (!absl::SimpleAtoi(part, &d) || d < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--cuda_devices: bad ordinal '", part, "'"));
    }
    out.push_back(d);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  ConfigureUsage();
  if (PrintHelpIfAsked(argc, argv)) return EXIT_SUCCESS;
  absl::ParseCommandLine(argc, argv);
  topk::server::SetMutexDeadlockDetection(absl::GetFlag(FLAGS_mutex_deadlock_detection));
  if (absl::Status valid = ValidateProcessFlags(); !valid.ok()) {
    spdlog::critical("cannot start: {}", valid.ToString());
    return EXIT_FAILURE;
  }
  spdlog::set_level(spdlog::level::from_str(absl::GetFlag(FLAGS_log_level)));
  if (!topk::server::LimitMallocArenas(absl::GetFlag(FLAGS_malloc_arenas))) {
    spdlog::warn("--malloc_arenas: the allocator refused; RSS may stay high after a burst");
  }
  if (absl::GetFlag(FLAGS_keep_heap) && !topk::server::KeepLargeBuffersResident()) {
    spdlog::warn("--keep_heap: the allocator refused; large requests will page-fault");
  }

  if (!InstallShutdownHandler()) {
    spdlog::critical("cannot install the SIGTERM/SIGINT handler");
    return EXIT_FAILURE;
  }

  absl::StatusOr<std::vector<int>> ordinals = ParseOrdinals(absl::GetFlag(FLAGS_cuda_devices));
  if (!ordinals.ok()) {
    spdlog::error("{}", ordinals.status().ToString());
    return EXIT_FAILURE;
  }
  topk::server::ServerOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key = absl::GetFlag(FLAGS_tls_key);
  options.tls_client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  options.tls_reload_interval = absl::GetFlag(FLAGS_tls_reload_interval);
  options.max_recv_message_bytes = absl::GetFlag(FLAGS_max_recv_message_bytes);
  options.max_send_message_bytes = absl::GetFlag(FLAGS_max_send_message_bytes);
  options.keepalive_time_ms = absl::GetFlag(FLAGS_keepalive_time_ms);
  options.keepalive_timeout_ms = absl::GetFlag(FLAGS_keepalive_timeout_ms);
  options.max_connection_idle_ms = absl::GetFlag(FLAGS_max_connection_idle_ms);
  options.max_connection_age_ms = absl::GetFlag(FLAGS_max_connection_age_ms);
  options.max_connection_age_grace_ms = absl::GetFlag(FLAGS_max_connection_age_grace_ms);
  options.enable_echo = absl::GetFlag(FLAGS_enable_echo);
  options.enable_reflection = absl::GetFlag(FLAGS_enable_reflection);
  options.regions = {.enabled = absl::GetFlag(FLAGS_enable_regions),
                     .allow_remote = absl::GetFlag(FLAGS_regions_allow_remote)};
  options.channels = {.max_channels = absl::GetFlag(FLAGS_max_channels),
                      .max_channels_per_session = absl::GetFlag(FLAGS_max_channels_per_session),
                      .spin_us = absl::GetFlag(FLAGS_channel_spin_us),
                      .idle_poll_us = absl::GetFlag(FLAGS_channel_poll_us)};
  options.backends.backend = absl::GetFlag(FLAGS_backend);
  options.backends.cuda_devices = *ordinals;
  options.backends.cuda_graphs = absl::GetFlag(FLAGS_cuda_graphs);
  options.backends.workers = absl::GetFlag(FLAGS_workers);
  options.backends.cpu_threads = absl::GetFlag(FLAGS_cpu_threads);
  options.backends.copy_threads = absl::GetFlag(FLAGS_copy_threads);
  options.backends.staging_streaming_stores = absl::GetFlag(FLAGS_staging_streaming_stores);
  options.engine.queue_depth = absl::GetFlag(FLAGS_queue_depth);
  options.engine.max_queue_delay_us = absl::GetFlag(FLAGS_max_queue_delay_us);
  options.engine.device_probe_ms = absl::GetFlag(FLAGS_device_probe_ms);
  options.exit_on_device_lost = absl::GetFlag(FLAGS_exit_on_device_lost);
  options.engine.limits = {.max_k = absl::GetFlag(FLAGS_max_k),
                           .max_rows = absl::GetFlag(FLAGS_max_rows),
                           .max_width = absl::GetFlag(FLAGS_max_width),
                           .max_batch_bytes = absl::GetFlag(FLAGS_max_batch_bytes)};
  options.calls.max_inflight_bytes = absl::GetFlag(FLAGS_max_inflight_bytes);
  options.calls.max_streams = absl::GetFlag(FLAGS_max_streams);
  options.calls.stream_idle_timeout = absl::GetFlag(FLAGS_stream_idle_timeout);
  options.calls.max_stream_chunks = absl::GetFlag(FLAGS_max_stream_chunks);
  options.release_memory_when_idle = absl::GetFlag(FLAGS_release_memory_when_idle);

  absl::StatusOr<std::unique_ptr<topk::server::Server>> server =
      topk::server::Server::Start(options);
  if (!server.ok()) {
    spdlog::critical("cannot start: {}", server.status().ToString());
    return EXIT_FAILURE;
  }
  const int signal_number = WaitForShutdownSignal();
  spdlog::info("received {}", signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  // A second signal during the drain cuts it short.
  std::thread second_signal([&server] {
    if (WaitForShutdownSignal() != kDrainOver) {
      spdlog::warn("second signal: ending the drain now");
      (*server)->Hurry();
    }
  });
  (*server)->Shutdown(absl::GetFlag(FLAGS_drain_deadline));
  const char over = kDrainOver;
  [[maybe_unused]] ssize_t n = write(shutdown_pipe[1], &over, 1);
  second_signal.join();
  return EXIT_SUCCESS;
}
