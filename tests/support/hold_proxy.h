// A loopback TCP forwarder for one client connection that can hold back what
// the client sends: bytes a client wrote before some event (a drain) reach
// the server only after it, as they do on a slow link or when the server's
// threads are busy. Replies flow through at once.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace topk::server::test {

class HoldProxy {
 public:
  explicit HoldProxy(int target_port) : target_port_(target_port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), length), 0);
    EXPECT_EQ(listen(listen_fd_, 1), 0);
    EXPECT_EQ(getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length), 0);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~HoldProxy() {
    stop_.store(true);
    shutdown(listen_fd_, SHUT_RDWR);  // ends a pending accept()
    thread_.join();
    close(listen_fd_);
  }
  HoldProxy(const HoldProxy&) = delete;
  HoldProxy& operator=(const HoldProxy&) = delete;

  int port() const { return port_; }
  // From now on the client's bytes are kept here.
  void Hold() { held_.store(true); }
  // Forwards what was kept, and everything after it.
  void Release() { held_.store(false); }
  // Bytes from the client kept so far.
  int64_t held_bytes() const { return held_bytes_.load(); }

 private:
  static bool WriteAll(int fd, const char* data, size_t bytes) {
    while (bytes > 0) {
      const ssize_t n = write(fd, data, bytes);
      if (n <= 0) return false;
      data += n;
      bytes -= static_cast<size_t>(n);
    }
    return true;
  }

  void Run() {
    const int client = accept(listen_fd_, nullptr, nullptr);
    if (client < 0) return;
    const int server = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(target_port_));
    if (connect(server, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
      Pump(client, server);
    }
    close(server);
    close(client);
  }

  void Pump(int client, int server) {
    std::string pending;  // from the client, not forwarded yet
    char buffer[1 << 16];
    while (!stop_.load()) {
      pollfd fds[2] = {{.fd = client, .events = POLLIN}, {.fd = server, .events = POLLIN}};
      if (poll(fds, 2, 10) < 0) return;
      if (fds[0].revents != 0) {
        const ssize_t n = read(client, buffer, sizeof(buffer));
        if (n <= 0) return;
        pending.append(buffer, static_cast<size_t>(n));
      }
      if (fds[1].revents != 0) {
        const ssize_t n = read(server, buffer, sizeof(buffer));
        if (n <= 0 || !WriteAll(client, buffer, static_cast<size_t>(n))) return;
      }
      if (!held_.load() && !pending.empty()) {
        if (!WriteAll(server, pending.data(), pending.size())) return;
        pending.clear();
      }
      held_bytes_.store(static_cast<int64_t>(pending.size()));
    }
  }

  const int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> held_{false};
  std::atomic<int64_t> held_bytes_{0};
  std::thread thread_;
};

}  // namespace topk::server::test
