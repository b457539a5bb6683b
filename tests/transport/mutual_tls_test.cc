// Mutual TLS (--tls_client_ca): on a TCP listener a call needs a client
// certificate that chains to the configured roots and is valid now; without
// one, with an expired one or with one from another CA the handshake fails
// and the call never reaches the service (no request counted). An
// authorised client's answers are exact; a unix socket does not ask for a
// client certificate. Certificates made by the test (test_certificates.h).
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "support/test_certificates.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

class MutualTls : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/topk_mtls_" + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
    const TestKeyPair server = ca_.Issue("topk-server");
    ReplaceFileAtomically(dir_ + "/server.pem", server.cert_pem);
    ReplaceFileAtomically(dir_ + "/server.key", server.key_pem);
    ReplaceFileAtomically(dir_ + "/client_ca.pem", ca_.cert_pem());
    options_ = SmallOptions();
    socket_ = dir_ + "/topk.sock";
    options_.listen = "127.0.0.1:0,unix:" + socket_;
    options_.tls_cert = dir_ + "/server.pem";
    options_.tls_key = dir_ + "/server.key";
    options_.tls_client_ca = dir_ + "/client_ca.pem";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<Server> Start() {
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options_);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  std::unique_ptr<client::Client> Connect(const std::string& target,
                                          const TestKeyPair& identity) const {
    return ConnectTls(target, ca_.cert_pem(), identity);
  }

  TestCa ca_{"topk-test-ca"};
  std::string dir_;
  std::string socket_;
  ServerOptions options_;
};

TEST_F(MutualTls, AnAuthorisedClientsAnswersAreExact) {
  std::unique_ptr<Server> server = Start();
  ASSERT_NE(server, nullptr);
  std::unique_ptr<client::Client> client = Connect(server->address(), ca_.Issue("frontend"));
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const tools::PackedRows rows =
        Rows(testing::Distribution::kIndexer, 4, 3000, testing::LengthPattern::kRandom, seed, 32);
    absl::StatusOr<client::SelectResult> result = client->Select(32, rows.view());
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_TRUE(tools::Verify(rows, 32, {}, *result).ok());
  }
}

TEST_F(MutualTls, HandshakesWithoutAValidClientCertificateAreRefused) {
  std::unique_ptr<Server> server = Start();
  ASSERT_NE(server, nullptr);
  const TestCa other("another-ca");
  const struct {
    const char* why;
    TestKeyPair identity;
  } refused[] = {
      {"no client certificate", {}},
      {"an expired client certificate", ca_.IssueExpired("expired-frontend")},
      {"a certificate from another CA", other.Issue("stranger")},
  };
  const tools::PackedRows rows = Rows(testing::Distribution::kIndexer, 2, 500);
  for (const auto& c : refused) {
    std::unique_ptr<client::Client> client = Connect(server->address(), c.identity);
    ASSERT_NE(client, nullptr) << c.why;
    const absl::Status status =
        client->Select(8, rows.view(), {.timeout = absl::Seconds(10)}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << c.why << ": " << status;
    EXPECT_FALSE(client->GetServerInfo().ok()) << c.why;
  }
  // None of them reached the service: an authorised client sees no request
  // but its own.
  std::unique_ptr<client::Client> authorised = Connect(server->address(), ca_.Issue("frontend"));
  ASSERT_TRUE(authorised->Select(8, rows.view()).ok());
  absl::StatusOr<v1::Stats> stats = authorised->GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->requests(), 1u);
  // Plaintext is refused too.
  absl::StatusOr<std::unique_ptr<client::Client>> plain =
      client::Client::Connect({.target = server->address()});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->Select(8, rows.view(), {.timeout = absl::Seconds(10)}).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(MutualTls, AUnixSocketAsksForNoClientCertificate) {
  std::unique_ptr<Server> server = Start();
  ASSERT_NE(server, nullptr);
  std::unique_ptr<client::Client> client = Connect("unix:" + socket_, {});
  const tools::PackedRows rows = Rows(testing::Distribution::kIndexer, 3, 2000);
  absl::StatusOr<client::SelectResult> result = client->Select(16, rows.view());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(tools::Verify(rows, 16, {}, *result).ok());
}

TEST_F(MutualTls, BadFilesStopTheStartNamingTheFlag) {
  ServerOptions options = options_;
  ReplaceFileAtomically(dir_ + "/not_pem", "not a certificate\n");
  options.tls_client_ca = dir_ + "/not_pem";
  absl::Status status = Server::Start(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "--tls_client_ca")) << status;

  options = options_;
  ReplaceFileAtomically(dir_ + "/other.key", ca_.Issue("someone-else").key_pem);
  options.tls_key = dir_ + "/other.key";
  status = Server::Start(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "does not match")) << status;

  options = options_;
  options.tls_cert.clear();
  options.tls_key.clear();
  status = Server::Start(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "--tls_client_ca needs")) << status;
}

}  // namespace
}  // namespace topk::server::test
