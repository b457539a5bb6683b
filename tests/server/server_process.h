// The real topk-server binary in a child process on a unix socket, for tests
// of what only a process shows (signals, exit status) or that measure the
// client's own memory without the server's in it.
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace topk::server::test {

class ServerProcess {
 public:
  // `flags` come after --listen, --metrics_listen= and --backend=cpu.
  explicit ServerProcess(const std::vector<std::string>& flags)
      : socket_(absl::StrCat("/tmp/topk-server-test-", getpid(), "-", next_id_++, ".sock")) {
    const std::string binary = TOPK_SERVER_BINARY;
    std::vector<std::string> args = {binary, "--listen=unix:" + socket_,
                                     "--metrics_listen=", "--backend=cpu", "--log_level=warn"};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, binary.c_str(), nullptr, nullptr, argv.data(), environ) != 0) pid_ = 0;
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
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
  pid_t pid_ = 0;
};

}  // namespace topk::server::test
