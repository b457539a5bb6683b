// A topk-server in another process, for what only a process shows (signals,
// exit status, the server's own resident set) and for measuring the client's
// memory without the server's in it. Two ways, one header:
//   ServerProcess: the topk-server binary, spawned on a unix socket;
//   ChildServer:   the in-process Server in a forked child (for tests that
//                  tune it as topk-server does and read its RSS).
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/process_tuning.h"
#include "server/server.h"
#include "topk/client/client.h"

extern char** environ;

namespace topk::server::test {

// The resident set of process `pid` in KiB (-1 when unreadable).
inline int64_t ResidentKb(pid_t pid = getpid()) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

// The topk-server binary: $TOPK_SERVER_BINARY (a relocated build's server,
// as the GPU-lab scripts run it), else the build's (the suite's
// TOPK_SERVER_BINARY definition).
inline std::string ServerBinary() {
  const char* relocated = std::getenv("TOPK_SERVER_BINARY");
  if (relocated != nullptr && *relocated != '\0') return relocated;
#ifdef TOPK_SERVER_BINARY
  return TOPK_SERVER_BINARY;
#else
  return "";
#endif
}

struct ServerProcessOptions {
  std::string backend = "cpu";
  std::string log_level = "warn";  // empty: the server's default
  // Sent by the destructor, which then waits for the exit: SIGKILL for a
  // quick end, SIGTERM to let a GPU server release its device cleanly.
  int stop_signal = SIGKILL;
};

// The real topk-server binary on a unix socket, without metrics.
class ServerProcess {
 public:
  // `flags` come after --listen, --metrics_listen=, --backend and --log_level.
  explicit ServerProcess(const std::vector<std::string>& flags,
                         const ServerProcessOptions& options = {})
      : socket_(absl::StrCat("/tmp/topk-server-test-", getpid(), "-", next_id_++, ".sock")),
        stop_signal_(options.stop_signal) {
    const std::string binary = ServerBinary();
    std::vector<std::string> args = {binary, "--listen=unix:" + socket_,
                                     "--metrics_listen=", "--backend=" + options.backend};
    if (!options.log_level.empty()) args.push_back("--log_level=" + options.log_level);
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (binary.empty() ||
        posix_spawn(&pid_, binary.c_str(), nullptr, nullptr, argv.data(), environ) != 0) {
      ADD_FAILURE() << "could not start topk-server '" << binary << "'";
      pid_ = 0;
    }
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, stop_signal_);
      waitpid(pid_, nullptr, 0);
    }
    unlink(socket_.c_str());
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  pid_t pid() const { return pid_; }
  std::string target() const { return "unix:" + socket_; }
  void Signal(int signal_number) const {
    if (pid_ > 0) kill(pid_, signal_number);
  }

  // The wait status once the process has exited, or nullopt if it is still
  // running after `timeout`.
  std::optional<int> WaitExit(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (pid_ > 0) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        return status;
      }
      if (absl::Now() >= deadline) break;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return std::nullopt;
  }

 private:
  static inline int next_id_ = 0;
  std::string socket_;
  int stop_signal_;
  pid_t pid_ = 0;
};

// A topk-server in a forked child, tuned as topk-server runs (malloc arenas,
// resident large buffers), serving until Stop(). Its resident set is its own:
// the clients' threads, channels and generated rows stay in the parent.
// Fork before this process starts any gRPC thread.
class ChildServer {
 public:
  explicit ChildServer(const ServerOptions& options) {
    int ready[2], stop[2];
    if (pipe(ready) != 0 || pipe(stop) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(ready[0]);
      close(stop[1]);
      LimitMallocArenas(kDefaultMallocArenas);  // as topk-server runs
      KeepLargeBuffersResident();
      absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
      const int port = server.ok() ? (*server)->port() : 0;
      [[maybe_unused]] ssize_t n = write(ready[1], &port, sizeof(port));
      char byte = 0;
      n = read(stop[0], &byte, 1);
      if (server.ok()) (*server)->Shutdown(absl::ZeroDuration());
      _exit(server.ok() ? 0 : 1);
    }
    close(ready[1]);
    close(stop[0]);
    stop_fd_ = stop[1];
    if (read(ready[0], &port_, sizeof(port_)) != sizeof(port_)) port_ = 0;
    close(ready[0]);
  }
  ~ChildServer() { Stop(); }
  ChildServer(const ChildServer&) = delete;
  ChildServer& operator=(const ChildServer&) = delete;

  int Stop() {
    if (pid_ <= 0) return -1;
    const char byte = 1;
    [[maybe_unused]] ssize_t n = write(stop_fd_, &byte, 1);
    close(stop_fd_);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  pid_t pid() const { return pid_; }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  pid_t pid_ = -1;
  int stop_fd_ = -1;
  int port_ = 0;
};

// A client of `target` (an address or "unix:..."), or null with a failure.
inline std::unique_ptr<client::Client> Connect(const std::string& target) {
  absl::StatusOr<std::unique_ptr<client::Client>> c = client::Client::Connect({.target = target});
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

}  // namespace topk::server::test
