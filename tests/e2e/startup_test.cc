// Startup refuses what it cannot serve, with a message naming the flag:
// a busy port (no SO_REUSEPORT sharing), a port out of range, limits whose
// buffers cannot be allocated or that gRPC cannot represent, an answer that
// can never fit the send limit, a TLS file that is not PEM.
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

void ExpectRefused(const ServerOptions& options, const char* word) {
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
  ASSERT_FALSE(server.ok()) << "started although " << word << " is impossible";
  EXPECT_TRUE(absl::StrContains(server.status().message(), word))
      << "'" << word << "' missing from: " << server.status();
}

TEST(Startup, ASecondServerOnABusyPortDoesNotStart) {
  TestServer first = StartServer();
  ServerOptions options = SmallOptions();
  options.listen = first.server->address();
  ExpectRefused(options, "cannot listen");
  // The first one still answers.
  EXPECT_TRUE(*first.client->IsServing());
}

TEST(Startup, APortOutOfRangeIsRefused) {
  ServerOptions options = SmallOptions();
  options.listen = "127.0.0.1:99999";
  ExpectRefused(options, "0..65535");
  options.listen = "127.0.0.1";
  ExpectRefused(options, "host:port");
}

TEST(Startup, ImpossibleLimitsAreRefusedNamingTheFlag) {
  struct Case {
    const char* flag;
    void (*set)(ServerOptions&);
  };
  const Case cases[] = {
      {"--max_k", [](ServerOptions& o) { o.engine.limits.max_k = 2147483647; }},
      {"--max_rows", [](ServerOptions& o) { o.engine.limits.max_rows = int64_t{1} << 62; }},
      {"--max_batch_bytes",
       [](ServerOptions& o) {
         o.engine.limits.max_batch_bytes = std::numeric_limits<int64_t>::max();
       }},
      {"--workers", [](ServerOptions& o) { o.backends.workers = 100000; }},
      {"--workers", [](ServerOptions& o) { o.backends.workers = -3; }},
      {"--cpu_threads", [](ServerOptions& o) { o.backends.cpu_threads = -1; }},
      {"--copy_threads", [](ServerOptions& o) { o.backends.copy_threads = -2; }},
      {"--copy_threads", [](ServerOptions& o) { o.backends.copy_threads = 257; }},
      {"--max_recv_message_bytes", [](ServerOptions& o) { o.max_recv_message_bytes = 0; }},
      {"--max_recv_message_bytes", [](ServerOptions& o) { o.max_recv_message_bytes = -1; }},
      {"--max_send_message_bytes", [](ServerOptions& o) { o.max_send_message_bytes = 100; }},
      {"--queue_depth", [](ServerOptions& o) { o.engine.queue_depth = 0; }},
      // Each alone fits the ranges; together the output buffers cannot.
      {"--max_rows x --max_k",
       [](ServerOptions& o) {
         o.engine.limits.max_rows = int64_t{1} << 24;
         o.engine.limits.max_k = 1 << 20;
         o.max_send_message_bytes = std::numeric_limits<int>::max();
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flag);
    ServerOptions options = SmallOptions();
    c.set(options);
    ExpectRefused(options, c.flag);
  }
}

TEST(Startup, ATlsFileThatIsNotPemIsNamed) {
  const std::string cert = ::testing::TempDir() + "/not_a_cert.pem";
  const std::string key = ::testing::TempDir() + "/not_a_key.pem";
  std::ofstream(cert) << "hello\n";
  std::ofstream(key) << "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
  ServerOptions options = SmallOptions();
  options.tls_cert = cert;
  options.tls_key = key;
  ExpectRefused(options, "--tls_cert");
  std::remove(cert.c_str());
  std::remove(key.c_str());
}

}  // namespace
}  // namespace topk::server::test
