// Shutdown while requests are in flight: every call is answered (exactly)
// or cleanly cancelled/refused, nothing hangs, nothing crashes.
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

using testing::Distribution;

struct Tally {
  absl::Mutex mu;
  int done = 0, exact = 0, cancelled = 0, other = 0;
};

void Fire(TestServer& t, const tools::PackedRows& rows, int32_t k, int calls, Tally& tally) {
  auto request =
      std::make_shared<const v1::SelectRequest>(client::Client::MakeRequest(k, rows.view(), {}));
  for (int i = 0; i < calls; ++i) {
    t.client->SelectAsync(request, {}, [&, k](absl::StatusOr<client::SelectResult> result) {
      const bool exact = result.ok() && tools::Verify(rows, k, {}, *result).ok();
      absl::MutexLock lock(&tally.mu);
      ++tally.done;
      if (exact) {
        ++tally.exact;
      } else if (!result.ok() && (result.status().code() == absl::StatusCode::kCancelled ||
                                  result.status().code() == absl::StatusCode::kUnavailable)) {
        ++tally.cancelled;
      } else {
        ++tally.other;
        ADD_FAILURE() << result.status();
      }
    });
  }
}

bool AllDone(Tally& tally, int calls) {
  std::pair<int*, int> goal(&tally.done, calls);
  absl::MutexLock lock(&tally.mu);
  return tally.mu.AwaitWithTimeout(
      absl::Condition(
          +[](std::pair<int*, int>* p) { return *p->first == p->second; }, &goal),
      absl::Seconds(120));
}

TEST(ServerShutdown, ShortDeadlineAnswersOrCancelsEverything) {
  ServerOptions options = SmallOptions();
  options.backends.workers = 1;
  TestServer t = StartServer(options);
  const tools::PackedRows rows =
      Rows(Distribution::kIndexer, 32, 1 << 15, testing::LengthPattern::kFull, 3, 256);
  constexpr int kCalls = 60;
  Tally tally;
  Fire(t, rows, 256, kCalls, tally);
  // Let some of them reach the server, then drain with a short deadline.
  absl::SleepFor(absl::Milliseconds(100));
  t.server->Shutdown(absl::Milliseconds(150));
  EXPECT_TRUE(AllDone(tally, kCalls));
  absl::MutexLock lock(&tally.mu);
  EXPECT_EQ(tally.done, kCalls);
  EXPECT_EQ(tally.other, 0);
  EXPECT_EQ(tally.exact + tally.cancelled, kCalls);
}

TEST(ServerShutdown, GenerousDeadlineDrainsEveryQueuedRequest) {
  TestServer t = StartServer();
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 8, 5000);
  constexpr int kCalls = 40;
  Tally tally;
  Fire(t, rows, 64, kCalls, tally);
  // Wait until the server has every call (they are queued or running).
  for (int i = 0; i < 500; ++i) {
    absl::StatusOr<v1::Stats> stats = t.client->GetStats();
    if (stats.ok() && stats->requests() == kCalls) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  t.server->Shutdown(absl::Seconds(60));
  EXPECT_TRUE(AllDone(tally, kCalls));
  absl::MutexLock lock(&tally.mu);
  EXPECT_EQ(tally.exact, kCalls);
}

TEST(ServerShutdown, NewCallsAfterShutdownFailCleanly) {
  TestServer t = StartServer();
  t.server->Shutdown(absl::Seconds(1));
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 2, 100);
  const absl::Status status = t.client->Select(4, rows.view()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
}

}  // namespace
}  // namespace topk::server::test
