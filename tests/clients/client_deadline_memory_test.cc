// The C++ client's own memory over calls that end DEADLINE_EXCEEDED: a 1 ms
// deadline against a server that needs ~15 ms for the request. The server
// runs in another process, so this process's resident set is the client's.
// A client that kept anything per call (a context, a reactor, the call's
// buffers) would grow with the calls; measured, it does not: after the
// first 200 calls the resident set moves within a few MiB over 2,000 more
// (sync over a unix socket, async with 200 in flight over TCP).
#include <string>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "server/process_tuning.h"
#include "support/server_process.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

using testing::Distribution;

constexpr int kWarmCalls = 200;
constexpr int kCalls = 2000;
// 8 KiB a call: a tenth of the growth once reported, far above the noise.
constexpr int64_t kGrowthBoundKb = 16 * 1024;

// 64 rows of 16K scores (4 MiB), K = 64: ~15 ms on the CPU backend.
tools::PackedRows SlowRows() {
  return Rows(Distribution::kIndexer, 64, 1 << 14, testing::LengthPattern::kFull, 3, 64);
}

// The server must really be slower than the deadline, and right.
void ExpectSlowAndExact(client::Client& client, const tools::PackedRows& rows,
                        const v1::SelectRequest& request) {
  absl::StatusOr<client::SelectResult> full = client.Select(request);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_TRUE(tools::Verify(rows, 64, {}, *full).ok());
  ASSERT_GT(full->client_us, 1000) << "the server answers within the 1 ms deadline";
}

void ExpectNoGrowth(int64_t warm_kb, int64_t after_kb, int exceeded) {
  ::testing::Test::RecordProperty("rss_warm_kb", std::to_string(warm_kb));
  ::testing::Test::RecordProperty("rss_after_kb", std::to_string(after_kb));
  // What was measured: calls that really ended at their deadline.
  EXPECT_GE(exceeded, kCalls * 9 / 10) << "only " << exceeded << " calls hit the deadline";
  EXPECT_LT(after_kb - warm_kb, kGrowthBoundKb)
      << "client RSS " << warm_kb << " kB after " << kWarmCalls << " calls, " << after_kb
      << " kB after " << kCalls << " more";
}

// First in the file: ChildServer forks, which must happen before this
// process starts any gRPC thread.
TEST(ClientMemory, AsyncCallsPastTheirDeadlineDoNotGrowTheClient) {
  ChildServer server(SmallOptions());
  ASSERT_GT(server.pid(), 0);
  std::unique_ptr<client::Client> client = Connect(server.address());
  ASSERT_NE(client, nullptr);
  const tools::PackedRows rows = SlowRows();
  auto request =
      std::make_shared<const v1::SelectRequest>(client::Client::MakeRequest(64, rows.view(), {}));
  ExpectSlowAndExact(*client, rows, *request);
  absl::Mutex mu;
  int done = 0, exceeded = 0, sent = 0;
  // `calls` at once, then waits for all of them.
  auto round = [&](int calls) {
    for (int i = 0; i < calls; ++i) {
      client->SelectAsync(request, {.timeout = absl::Milliseconds(1)},
                          [&](absl::StatusOr<client::SelectResult> r) {
                            absl::MutexLock lock(&mu);
                            ++done;
                            exceeded += r.status().code() == absl::StatusCode::kDeadlineExceeded;
                          });
    }
    sent += calls;
    absl::MutexLock lock(&mu);
    std::pair<int*, int> goal(&done, sent);
    ASSERT_TRUE(mu.AwaitWithTimeout(
        absl::Condition(
            +[](std::pair<int*, int>* g) { return *g->first >= g->second; }, &goal),
        absl::Seconds(60)));
  };
  round(kWarmCalls);
  const int64_t warm = ResidentBytes() >> 10;
  exceeded = 0;
  for (int i = 0; i < kCalls / kWarmCalls; ++i) round(kWarmCalls);
  ExpectNoGrowth(warm, ResidentBytes() >> 10, exceeded);
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ClientMemory, SyncCallsPastTheirDeadlineDoNotGrowTheClient) {
  ServerProcess server({"--max_rows=64", "--max_width=65536", "--max_k=512"});
  ASSERT_GT(server.pid(), 0);
  auto client = *client::Client::Connect({.target = server.target()});
  ASSERT_TRUE(client->WaitForServing(absl::Seconds(20)).ok());
  const tools::PackedRows rows = SlowRows();
  const v1::SelectRequest request = client::Client::MakeRequest(64, rows.view(), {});
  ExpectSlowAndExact(*client, rows, request);
  int exceeded = 0;
  auto round = [&](int calls) {
    for (int i = 0; i < calls; ++i) {
      absl::StatusOr<client::SelectResult> r =
          client->Select(request, {.timeout = absl::Milliseconds(1)});
      exceeded += r.status().code() == absl::StatusCode::kDeadlineExceeded;
    }
  };
  round(kWarmCalls);
  const int64_t warm = ResidentBytes() >> 10;
  exceeded = 0;
  round(kCalls);
  ExpectNoGrowth(warm, ResidentBytes() >> 10, exceeded);
}

}  // namespace
}  // namespace topk::server::test
