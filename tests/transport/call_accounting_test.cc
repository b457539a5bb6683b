// Every Select call is counted once in topk_requests_total and, when it
// fails, once under the code its client saw: cancelled uploads are
// CANCELLED (not INVALID_ARGUMENT), streams cut off mid-way are requests,
// an answer over the send limit is an error (not a success).
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "support/raw_calls.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

using testing::Distribution;

uint64_t Errors(const v1::Stats& stats, const std::string& code) {
  auto it = stats.errors().find(code);
  return it == stats.errors().end() ? 0 : it->second;
}

uint64_t AllErrors(const v1::Stats& stats) {
  uint64_t total = 0;
  for (const auto& [code, count] : stats.errors()) total += count;
  return total;
}

// Successes are the requests whose rows were counted; with one row count
// per request shape the arithmetic is exact.
void ExpectBalanced(const v1::Stats& stats, uint64_t successes) {
  EXPECT_EQ(stats.requests(), AllErrors(stats) + successes) << stats.DebugString();
}

// A stream is counted when gRPC is done with it, just after its client has
// the answer: the stats once every request has its outcome (or after 5 s).
v1::Stats SettledStats(client::Client& client, uint64_t successes) {
  v1::Stats stats;
  for (int i = 0; i < 500; ++i) {
    absl::StatusOr<v1::Stats> now = client.GetStats();
    if (now.ok()) stats = *now;
    if (now.ok() && stats.requests() == AllErrors(stats) + successes) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return stats;
}

TEST(CallAccounting, ClientDeadlineOnALargeSelectIsCancelledNotInvalid) {
  TestServer t = StartServer();
  // 12 MiB that cannot arrive within 1 ms.
  const tools::PackedRows rows =
      Rows(Distribution::kIndexer, 48, 1 << 16, testing::LengthPattern::kFull, 5, 16);
  const v1::SelectRequest request = client::Client::MakeRequest(16, rows.view(), {});
  int failed = 0;
  for (int i = 0; i < 6; ++i) {
    const absl::Status status =
        t.client->Select(request, {.timeout = absl::Milliseconds(1)}).status();
    if (!status.ok()) {
      ++failed;
      EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
    }
  }
  ASSERT_GT(failed, 0) << "every 12 MiB call beat a 1 ms deadline";
  absl::SleepFor(absl::Milliseconds(200));  // the server finishes its side
  absl::StatusOr<v1::Stats> stats = t.client->GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(Errors(*stats, "INVALID_ARGUMENT"), 0u) << stats->DebugString();
  EXPECT_LE(stats->requests(), 6u);
}

TEST(CallAccounting, StreamsCutOffMidwayAreRequests) {
  TestServer t = StartServer();
  const tools::PackedRows many = Rows(Distribution::kIndexer, 100, 10);  // over max_rows = 64
  for (int i = 0; i < 3; ++i) {
    const absl::Status status = t.client->SelectStreaming(4, many.view(), {}, 64).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  }
  const RawReply garbage =
      RawClientStream(t.client->channel(), "/topk.v1.TopK/SelectStream", {"\xff\xff\xff"});
  EXPECT_EQ(garbage.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const v1::Stats stats = SettledStats(*t.client, 0);
  EXPECT_EQ(stats.requests(), 4u);
  EXPECT_EQ(Errors(stats, "INVALID_ARGUMENT"), 4u);
  ExpectBalanced(stats, 0);
}

TEST(CallAccounting, AnAnswerOverTheSendLimitIsAnError) {
  ServerOptions options = SmallOptions();
  // Indices of a full request fit (64 x 512 x 4 = 128 KiB); with values they
  // do not.
  options.max_send_message_bytes = 200 << 10;
  TestServer t = StartServer(options);
  const tools::PackedRows rows =
      Rows(Distribution::kIndexer, 64, 600, testing::LengthPattern::kFull);
  absl::StatusOr<client::SelectResult> indices_only = t.client->Select(512, rows.view());
  ASSERT_TRUE(indices_only.ok()) << indices_only.status();
  EXPECT_TRUE(tools::Verify(rows, 512, {}, *indices_only).ok());
  const absl::Status with_values =
      t.client->Select(512, rows.view(), {.return_values = true}).status();
  EXPECT_EQ(with_values.code(), absl::StatusCode::kResourceExhausted) << with_values;
  EXPECT_TRUE(absl::StrContains(with_values.message(), "--max_send_message_bytes")) << with_values;
  absl::StatusOr<v1::Stats> stats = t.client->GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->rows(), 64u);  // the first request only
  EXPECT_EQ(Errors(*stats, "RESOURCE_EXHAUSTED"), 1u);
  ExpectBalanced(*stats, 1);
}

// gRPC refuses a message over --max_recv_message_bytes in its transport,
// before the call reaches the service (docs/service.md, Metrics): the
// client sees RESOURCE_EXHAUSTED, and the server's counters are unchanged
// rather than wrong. A stream's oversize chunk arrives inside a call the
// service already holds: it must fail the stream, never end it cleanly.
TEST(CallAccounting, AMessageOverTheReceiveLimitIsRefusedNotMiscounted) {
  ServerOptions options = SmallOptions();
  options.max_recv_message_bytes = 1 << 20;
  TestServer t = StartServer(options);
  const tools::PackedRows rows =
      Rows(Distribution::kIndexer, 8, 50000, testing::LengthPattern::kFull);
  const absl::Status unary = t.client->Select(16, rows.view()).status();
  EXPECT_EQ(unary.code(), absl::StatusCode::kResourceExhausted) << unary;
  const absl::Status stream =
      t.client->SelectStreaming(16, rows.view(), {}, size_t{3} << 20).status();
  EXPECT_FALSE(stream.ok());
  EXPECT_NE(stream.code(), absl::StatusCode::kInvalidArgument) << stream;
  const v1::Stats stats = SettledStats(*t.client, 0);
  EXPECT_EQ(stats.rows(), 0u);
  EXPECT_EQ(Errors(stats, "INVALID_ARGUMENT"), 0u) << stats.DebugString();
  ExpectBalanced(stats, 0);
  // The server is unharmed.
  const tools::PackedRows small = Rows(Distribution::kIndexer, 4, 1000);
  absl::StatusOr<client::SelectResult> ok = t.client->Select(16, small.view());
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(tools::Verify(small, 16, {}, *ok).ok());
}

}  // namespace
}  // namespace topk::server::test
