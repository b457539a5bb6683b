// The TLS listener end to end. (The engine building blocks this suite also
// held are unit tested in their layers now: tests/engine/bounded_queue_test,
// tests/backends/plan_buckets_test, tests/transport/validate_test. The
// target keeps its name for the GPU-lab scripts that run it by name.)
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

// A self-signed certificate for 127.0.0.1 / localhost, made by the openssl CLI.
bool MakeCertificate(const std::string& dir) {
  const std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
      dir + "/key.pem -out " + dir + "/cert.pem >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

TEST(Tls, SelectOverTls) {
  const std::string dir = ::testing::TempDir() + "/topk_tls";
  std::filesystem::create_directories(dir);
  if (!MakeCertificate(dir)) GTEST_SKIP() << "no openssl CLI to make a test certificate";
  ServerOptions options = SmallOptions();
  options.tls_cert = dir + "/cert.pem";
  options.tls_key = dir + "/key.pem";
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  std::ifstream in(dir + "/cert.pem");
  const std::string roots((std::istreambuf_iterator<char>(in)), {});
  client::ClientOptions secure;
  secure.target = (*server)->address();
  secure.tls = true;
  secure.root_certs_pem = roots;
  secure.tls_server_name = "localhost";
  auto client = *client::Client::Connect(secure);
  const tools::PackedRows rows = Rows(testing::Distribution::kIndexer, 4, 3000);
  absl::StatusOr<client::SelectResult> result = client->Select(32, rows.view());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(tools::Verify(rows, 32, {}, *result).ok());
  // A plaintext client cannot talk to it.
  client::ClientOptions plain;
  plain.target = (*server)->address();
  auto plaintext = *client::Client::Connect(plain);
  EXPECT_FALSE(plaintext->Select(32, rows.view(), {.timeout = absl::Seconds(5)}).ok());
}

TEST(Tls, HalfConfiguredTlsIsRefusedAtStart) {
  ServerOptions options = SmallOptions();
  options.tls_cert = "/nonexistent/cert.pem";
  const absl::Status status = Server::Start(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

}  // namespace
}  // namespace topk::server::test
