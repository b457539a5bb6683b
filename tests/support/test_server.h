// An in-process topk-server on a free loopback port with small limits (so
// the suites stay fast on a 2-core CI machine), plus a client connected to it.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "packed_rows.h"
#include "server/server.h"
#include "topk/client/client.h"

namespace topk::server::test {

// The backend the suites run on: cpu in CI; TOPK_TEST_BACKEND=cuda runs the
// same suites on a GPU.
inline std::string TestBackend() {
  const char* backend = std::getenv("TOPK_TEST_BACKEND");
  return backend != nullptr && *backend != '\0' ? backend : "cpu";
}

inline ServerOptions SmallOptions() {
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "";
  options.backends.backend = TestBackend();
  options.backends.workers = 2;
  options.backends.cpu_threads = 1;
  options.engine.queue_depth = 256;
  options.engine.limits = {.max_k = 512,
                           .max_rows = 64,
                           .max_width = int64_t{1} << 16,
                           .max_batch_bytes = int64_t{16} << 20};
  return options;
}

struct TestServer {
  std::unique_ptr<Server> server;
  std::unique_ptr<client::Client> client;

  std::unique_ptr<client::Client> NewClient() const {
    absl::StatusOr<std::unique_ptr<client::Client>> c =
        client::Client::Connect({.target = server->address()});
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
};

inline TestServer StartServer(const ServerOptions& options = SmallOptions()) {
  TestServer t;
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return t;
  t.server = *std::move(server);
  t.client = t.NewClient();
  return t;
}

inline tools::PackedRows Rows(testing::Distribution distribution, int64_t rows, int64_t width,
                              testing::LengthPattern lengths = testing::LengthPattern::kRandom,
                              uint64_t seed = 1, int32_t k = 64) {
  return tools::Generate({.distribution = distribution,
                          .lengths = lengths,
                          .rows = rows,
                          .width = width,
                          .k = k,
                          .seed = seed});
}

}  // namespace topk::server::test
