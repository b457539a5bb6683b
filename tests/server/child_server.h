// A topk-server in a forked child process, for tests that measure the
// server's own resident set (the clients' threads, channels and buffers stay
// in the parent). Fork before this process starts any gRPC thread.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/process_tuning.h"
#include "server/server.h"
#include "topk/client/client.h"

namespace topk::server::test {

// The server runs in a child process, so its resident set is its own (the
// clients' threads, channels and generated rows are the parent's).
inline int64_t ResidentKb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

// A topk-server in a forked child (forked before this process starts any
// gRPC thread): it serves until Stop().
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

inline std::unique_ptr<client::Client> Connect(const std::string& address) {
  absl::StatusOr<std::unique_ptr<client::Client>> c = client::Client::Connect({.target = address});
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

}  // namespace topk::server::test
