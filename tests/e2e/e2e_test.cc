// End to end over loopback: the in-process server, the C++ client library,
// and every answer checked by the exactness verifier.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

using testing::Distribution;
using testing::LengthPattern;

struct Case {
  Distribution distribution;
  LengthPattern lengths;
  int32_t k;
  bool sorted;
  bool deterministic;
};

TEST(ServerE2e, SelectIsExactAcrossDistributionsAndOptions) {
  TestServer t = StartServer();
  ASSERT_NE(t.client, nullptr);
  const Case cases[] = {
      {Distribution::kIndexer, LengthPattern::kRandom, 64, false, false},
      {Distribution::kIndexer, LengthPattern::kCausalTerminal, 512, true, false},
      {Distribution::kBf16Ties, LengthPattern::kRandom, 100, false, true},
      {Distribution::kFp8Ties, LengthPattern::kEdges, 33, true, true},
      {Distribution::kInfMix, LengthPattern::kRandom, 7, true, false},
      {Distribution::kConstant, LengthPattern::kFull, 1, false, true},
      {Distribution::kSignedZeros, LengthPattern::kEdges, 16, false, false},
      {Distribution::kAllMinusInf, LengthPattern::kRandom, 300, true, true},
      {Distribution::kStridePeriodic, LengthPattern::kFull, 128, false, false},
      {Distribution::kSubnormals, LengthPattern::kRandom, 50, false, false},
  };
  uint64_t seed = 1;
  for (const Case& c : cases) {
    const tools::PackedRows rows = Rows(c.distribution, 13, 20000, c.lengths, seed++, c.k);
    const client::CallOptions options{.sorted = c.sorted, .deterministic = c.deterministic};
    absl::StatusOr<client::SelectResult> result = t.client->Select(c.k, rows.view(), options);
    ASSERT_TRUE(result.ok()) << testing::DistributionName(c.distribution) << ": "
                             << result.status();
    EXPECT_TRUE(
        tools::Verify(rows, c.k, {.sorted = c.sorted, .deterministic = c.deterministic}, *result)
            .ok())
        << testing::DistributionName(c.distribution);
    // The stages are disjoint parts of the server's total.
    EXPECT_GE(result->server.prepare_us, 0);
    EXPECT_LE(result->server.prepare_us + result->server.queue_us + result->server.device_us,
              result->server.total_us);
  }
}

TEST(ServerE2e, DeterministicAnswersAreBitIdentical) {
  TestServer t = StartServer();
  const tools::PackedRows rows = Rows(Distribution::kFp8Ties, 8, 30000);
  const client::CallOptions options{.deterministic = true};
  absl::StatusOr<client::SelectResult> a = t.client->Select(200, rows.view(), options);
  absl::StatusOr<client::SelectResult> b = t.client->Select(200, rows.view(), options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->indices, b->indices);
  EXPECT_TRUE(tools::Verify(rows, 200, {.deterministic = true}, *a).ok());
}

// Every returned value is the score at its index, bit for bit; NaN at -1.
void ExpectValuesMatchTheScores(const tools::PackedRows& rows, int32_t k,
                                const client::SelectResult& result) {
  ASSERT_EQ(result.values.size(), result.indices.size());
  for (size_t r = 0; r < rows.lengths.size(); ++r) {
    for (int j = 0; j < k; ++j) {
      const int32_t i = result.indices[r * k + j];
      const float v = result.values[r * k + j];
      if (i < 0) {
        EXPECT_TRUE(std::isnan(v));
      } else {
        EXPECT_EQ(std::memcmp(&v, &rows.scores[rows.offsets[r] + i], sizeof(float)), 0);
      }
    }
  }
}

TEST(ServerE2e, ReturnValuesMatchTheScores) {
  TestServer t = StartServer();
  const tools::PackedRows rows = Rows(Distribution::kNormal, 6, 500, LengthPattern::kEdges, 3, 64);
  absl::StatusOr<client::SelectResult> result =
      t.client->Select(64, rows.view(), {.sorted = true, .return_values = true});
  ASSERT_TRUE(result.ok()) << result.status();
  ExpectValuesMatchTheScores(rows, 64, *result);
}

// A stream's rows reach the backend from another source than a unary call's
// (its accumulated chunks, read in place on the CPU): values come from there.
TEST(ServerE2e, StreamingReturnValuesMatchTheScores) {
  TestServer t = StartServer();
  const tools::PackedRows rows = Rows(Distribution::kNormal, 7, 3000, LengthPattern::kEdges, 4, 48);
  absl::StatusOr<client::SelectResult> result =
      t.client->SelectStreaming(48, rows.view(), {.sorted = true, .return_values = true}, 1001);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(tools::Verify(rows, 48, {.sorted = true}, *result).ok());
  ExpectValuesMatchTheScores(rows, 48, *result);
}

TEST(ServerE2e, StreamingCarriesARequestLargerThanOneMessage) {
  ServerOptions options = SmallOptions();
  options.max_recv_message_bytes = 1 << 20;  // 1 MiB messages
  TestServer t = StartServer(options);
  // 48 rows x up to 64K floats: about 6 MiB of scores.
  const tools::PackedRows rows =
      Rows(Distribution::kIndexer, 48, 1 << 16, LengthPattern::kCausalTerminal, 5, 256);
  ASSERT_GT(rows.bytes(), 4 << 20);
  absl::StatusOr<client::SelectResult> unary = t.client->Select(256, rows.view());
  EXPECT_EQ(unary.status().code(), absl::StatusCode::kResourceExhausted) << unary.status();
  absl::StatusOr<client::SelectResult> streamed =
      t.client->SelectStreaming(256, rows.view(), {.sorted = true}, 300 * 1000 + 2);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_TRUE(tools::Verify(rows, 256, {.sorted = true}, *streamed).ok());
}

TEST(ServerE2e, StreamingOfASmallBatchMatchesUnary) {
  TestServer t = StartServer();
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 10, 4000);
  absl::StatusOr<client::SelectResult> unary = t.client->Select(32, rows.view(), {.sorted = true});
  absl::StatusOr<client::SelectResult> streamed =
      t.client->SelectStreaming(32, rows.view(), {.sorted = true}, 1000);
  ASSERT_TRUE(unary.ok() && streamed.ok()) << unary.status() << streamed.status();
  EXPECT_EQ(unary->indices, streamed->indices);
}

TEST(ServerE2e, AsyncCallsAllComplete) {
  TestServer t = StartServer();
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 4, 3000);
  auto request =
      std::make_shared<const v1::SelectRequest>(client::Client::MakeRequest(64, rows.view(), {}));
  constexpr int kCalls = 200;
  absl::Mutex mu;
  int done = 0, good = 0;
  for (int i = 0; i < kCalls; ++i) {
    t.client->SelectAsync(request, {}, [&](absl::StatusOr<client::SelectResult> result) {
      const bool ok = result.ok() && tools::Verify(rows, 64, {}, *result).ok();
      absl::MutexLock lock(&mu);
      ++done;
      good += ok;
    });
  }
  absl::MutexLock lock(&mu);
  mu.AwaitWithTimeout(absl::Condition(
                          +[](int* d) { return *d == kCalls; }, &done),
                      absl::Seconds(60));
  EXPECT_EQ(done, kCalls);
  EXPECT_EQ(good, kCalls);
}

TEST(ServerE2e, ServerInfoReportsTheBackendAndLimits) {
  TestServer t = StartServer();
  absl::StatusOr<v1::ServerInfo> info = t.client->GetServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->backend(), TestBackend());
  EXPECT_FALSE(info->backend_reason().empty());
  EXPECT_FALSE(info->version().empty());
  ASSERT_GE(info->devices_size(), 1);
  if (TestBackend() == "cpu") {
    EXPECT_EQ(info->devices(0).ordinal(), -1);
  } else {
    EXPECT_GE(info->devices(0).ordinal(), 0);
    EXPECT_FALSE(info->devices(0).uuid().empty());
  }
  EXPECT_EQ(info->devices(0).workers(), 2);
  EXPECT_TRUE(info->devices(0).usable());
  EXPECT_EQ(info->limits().max_k(), 512);
  EXPECT_EQ(info->limits().max_rows(), 64);
  EXPECT_EQ(info->limits().max_width(), 1 << 16);
  EXPECT_FALSE(info->echo_enabled());
}

TEST(ServerE2e, StatsCountRequestsErrorsAndLatencies) {
  TestServer t = StartServer();
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 3, 1000);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(t.client->Select(16, rows.view()).ok());
  EXPECT_FALSE(t.client->Select(0, rows.view()).ok());
  absl::StatusOr<v1::Stats> stats = t.client->GetStats(true);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->requests(), 6u);
  EXPECT_EQ(stats->rows(), 15u);
  EXPECT_EQ(stats->bytes_in(), 6u * rows.bytes());
  EXPECT_EQ(stats->bytes_out(), 5u * 3 * 16 * 4);
  EXPECT_EQ(stats->errors().at("INVALID_ARGUMENT"), 1u);
  EXPECT_EQ(stats->total_latency().count(), 5u);
  EXPECT_EQ(stats->prepare_latency().count(), 5u);
  EXPECT_EQ(stats->total_latency().cumulative_counts_size(),
            stats->total_latency().upper_bounds_us_size() + 1);
  EXPECT_EQ(stats->queue_depth(), 0);
  EXPECT_NE(stats->prometheus_text().find("topk_requests_total 6"), std::string::npos)
      << stats->prometheus_text();
  EXPECT_NE(stats->prometheus_text().find("topk_latency_seconds_bucket"), std::string::npos);
}

TEST(ServerE2e, EchoIsOffUnlessEnabled) {
  TestServer off = StartServer();
  EXPECT_EQ(off.client->Echo("abc").status().code(), absl::StatusCode::kUnimplemented);
  ServerOptions options = SmallOptions();
  options.enable_echo = true;
  TestServer on = StartServer(options);
  absl::StatusOr<std::string> echoed = on.client->Echo("payload");
  ASSERT_TRUE(echoed.ok()) << echoed.status();
  EXPECT_EQ(*echoed, "payload");
  absl::StatusOr<std::string> trimmed = on.client->Echo("payload", 3);
  ASSERT_TRUE(trimmed.ok()) << trimmed.status();
  EXPECT_EQ(*trimmed, "pay");
}

// One HTTP/1.0 GET over a plain socket: enough to read the scrape endpoint.
std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buffer[4096];
      for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) reply.append(buffer, n);
    }
  }
  close(fd);
  return reply;
}

TEST(ServerE2e, MetricsPortServesPrometheusText) {
  ServerOptions options = SmallOptions();
  options.metrics_listen = "127.0.0.1:0";
  TestServer t = StartServer(options);
  ASSERT_GT(t.server->metrics_port(), 0);
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 2, 500);
  ASSERT_TRUE(t.client->Select(8, rows.view()).ok());
  const std::string scrape = HttpGet(t.server->metrics_port(), "/metrics");
  EXPECT_NE(scrape.find("200 OK"), std::string::npos) << scrape;
  EXPECT_NE(scrape.find("topk_requests_total 1"), std::string::npos) << scrape;
  EXPECT_NE(scrape.find("topk_latency_seconds_bucket{stage=\"total\""), std::string::npos);
  EXPECT_NE(scrape.find("topk_queue_depth 0"), std::string::npos);
}

}  // namespace
}  // namespace topk::server::test
