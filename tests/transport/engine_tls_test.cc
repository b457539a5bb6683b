// Engine building blocks without a transport (queue, buckets, validation),
// and the TLS listener end to end.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "server/backends/plan_buckets.h"
#include "server/engine/bounded_queue.h"
#include "server/transport/validate.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

TEST(BoundedQueue, RefusesWhenFullAndDrainsAfterClose) {
  BoundedQueue<int> queue(2);
  EXPECT_TRUE(queue.TryPush(1));
  EXPECT_TRUE(queue.TryPush(2));
  EXPECT_FALSE(queue.TryPush(3));
  EXPECT_EQ(queue.size(), 2u);
  EXPECT_EQ(*queue.Pop(), 1);
  EXPECT_TRUE(queue.TryPush(3));
  queue.Close();
  EXPECT_FALSE(queue.TryPush(4));
  EXPECT_EQ(*queue.Pop(), 2);
  EXPECT_EQ(*queue.Pop(), 3);
  EXPECT_FALSE(queue.Pop().has_value());
}

TEST(PlanBuckets, RoundRowsAndWidthUpToPowersOfTwoWithinTheLimits) {
  const RequestLimits limits{.max_k = 2048, .max_rows = 100, .max_width = 100000};
  const PlanKey key = BucketOf(7, 33, 70000, {.sorted = true}, limits);
  EXPECT_EQ(key.k, 7);
  EXPECT_EQ(key.max_rows, 64);
  EXPECT_EQ(key.max_width, 100000);  // 131072 capped at max_width
  EXPECT_TRUE(key.sorted);
  EXPECT_EQ(BucketOf(7, 1, 0, {}, limits).max_width, 1);  // all-empty rows still plan
  EXPECT_EQ(RoundUpPow2(65, 1 << 20), 128);
}

TEST(Validate, AcceptsAWellFormedBatchAndReportsTheLongestRow) {
  const RequestLimits limits{.max_k = 16, .max_rows = 4, .max_width = 100};
  const int32_t lengths[] = {3, 0, 100};
  absl::StatusOr<int32_t> longest = ValidateSelect(16, 3, lengths, 4 * 103, limits);
  ASSERT_TRUE(longest.ok()) << longest.status();
  EXPECT_EQ(*longest, 100);
  const absl::Status too_big =
      ValidateSelect(16, 3, lengths, 4 * 103,
                     {.max_k = 16, .max_rows = 4, .max_width = 100, .max_batch_bytes = 400})
          .status();
  EXPECT_TRUE(absl::StrContains(too_big.message(), "max_batch_bytes")) << too_big;
}

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
