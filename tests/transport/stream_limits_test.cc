// What a server holds for its clients is bounded: open streams (count, idle
// time, chunks) and request bytes in flight (a memory budget answered with
// RESOURCE_EXHAUSTED).
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "support/raw_calls.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

using testing::Distribution;

void ExpectCode(const grpc::Status& status, grpc::StatusCode code, const char* word) {
  EXPECT_EQ(status.error_code(), code) << status.error_code() << ": " << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), word))
      << "'" << word << "' missing from: " << status.error_message();
}

TEST(StreamLimits, StreamsBeyondMaxStreamsAreRefused) {
  ServerOptions options = SmallOptions();
  options.calls.max_streams = 2;
  options.calls.stream_idle_timeout = absl::Seconds(2);
  TestServer t = StartServer(options);
  std::atomic<bool> first{false}, second{false}, third{false};
  grpc::Status held[2];
  std::thread a(
      [&] { held[0] = OpenStream(t.client->channel(), 4, 0, absl::ZeroDuration(), &first); });
  std::thread b(
      [&] { held[1] = OpenStream(t.client->channel(), 4, 0, absl::ZeroDuration(), &second); });
  WaitFor(first);
  WaitFor(second);
  absl::SleepFor(absl::Milliseconds(50));
  ExpectCode(OpenStream(t.client->channel(), 4, 0, absl::ZeroDuration(), &third),
             grpc::StatusCode::RESOURCE_EXHAUSTED, "--max_streams");
  a.join();
  b.join();
  // The held ones ended for idleness, which frees their places.
  ExpectCode(held[0], grpc::StatusCode::DEADLINE_EXCEEDED, "--stream_idle_timeout");
  // (The server releases a place when gRPC is done with the call, just after
  // its client saw the status: allow it a moment.)
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 4, 3000);
  absl::StatusOr<client::SelectResult> ok = t.client->SelectStreaming(8, rows.view(), {}, 4096);
  for (int i = 0; i < 100 && absl::IsResourceExhausted(ok.status()); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    ok = t.client->SelectStreaming(8, rows.view(), {}, 4096);
  }
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(tools::Verify(rows, 8, {}, *ok).ok());
}

TEST(StreamLimits, AnIdleStreamIsEnded) {
  ServerOptions options = SmallOptions();
  options.calls.stream_idle_timeout = absl::Milliseconds(300);
  TestServer t = StartServer(options);
  std::atomic<bool> started{false};
  const absl::Time start = absl::Now();
  ExpectCode(OpenStream(t.client->channel(), 4096, 0, absl::ZeroDuration(), &started),
             grpc::StatusCode::DEADLINE_EXCEEDED, "sent nothing");
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  // A slow but steady stream is not idle.
  std::atomic<bool> steady_started{false};
  const grpc::Status steady =
      OpenStream(t.client->channel(), 4096, 8, absl::Milliseconds(100), &steady_started);
  // It never half-closes, so it ends idle too, but only after its 8 chunks.
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(800 + 300));
  EXPECT_EQ(steady.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST(StreamLimits, ChunksBeyondMaxStreamChunksAreRefused) {
  ServerOptions options = SmallOptions();
  options.calls.max_stream_chunks = 10;
  TestServer t = StartServer(options);
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 4, 3000);
  const absl::Status many = t.client->SelectStreaming(8, rows.view(), {}, 1024).status();
  EXPECT_EQ(many.code(), absl::StatusCode::kResourceExhausted) << many;
  EXPECT_TRUE(absl::StrContains(many.message(), "--max_stream_chunks")) << many;
  absl::StatusOr<client::SelectResult> few = t.client->SelectStreaming(8, rows.view(), {}, 8192);
  ASSERT_TRUE(few.ok()) << few.status();
  EXPECT_TRUE(tools::Verify(rows, 8, {}, *few).ok());
}

TEST(StreamLimits, RequestBytesInFlightHaveABudget) {
  ServerOptions options = SmallOptions();
  options.engine.limits.max_batch_bytes = 4 << 20;
  options.calls.max_inflight_bytes = 8 << 20;
  options.calls.stream_idle_timeout = absl::Seconds(2);
  TestServer t = StartServer(options);
  // Two streams hold 3 MiB each; a third 3 MiB does not fit in 8 MiB.
  std::atomic<bool> first{false}, second{false}, third{false};
  std::thread a([&] { OpenStream(t.client->channel(), 3 << 20, 0, absl::ZeroDuration(), &first); });
  std::thread b(
      [&] { OpenStream(t.client->channel(), 3 << 20, 0, absl::ZeroDuration(), &second); });
  WaitFor(first);
  WaitFor(second);
  absl::SleepFor(absl::Milliseconds(100));
  ExpectCode(OpenStream(t.client->channel(), 3 << 20, 0, absl::ZeroDuration(), &third),
             grpc::StatusCode::RESOURCE_EXHAUSTED, "--max_inflight_bytes");
  const tools::PackedRows big =
      Rows(Distribution::kIndexer, 48, 16384, testing::LengthPattern::kFull, 4, 16);
  const absl::Status unary = t.client->Select(16, big.view()).status();
  EXPECT_EQ(unary.code(), absl::StatusCode::kResourceExhausted) << unary;
  a.join();
  b.join();
  // Their bytes are released with them (when gRPC is done with each).
  absl::StatusOr<client::SelectResult> ok = t.client->Select(16, big.view());
  for (int i = 0; i < 100 && absl::IsResourceExhausted(ok.status()); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    ok = t.client->Select(16, big.view());
  }
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(tools::Verify(big, 16, {}, *ok).ok());
}

}  // namespace
}  // namespace topk::server::test
