// Shutdown as a lame duck: health NOT_SERVING at once, new calls refused
// with UNAVAILABLE (and a hint to retry), calls in flight (uploads included)
// answered exactly, and so are unary calls, pipelined requests and streams
// sent before the drain that reach the server in its dispatch grace; an idle
// stream or an open Health.Watch does not hold the exit for the whole
// deadline, and Hurry() (a second SIGTERM) ends the wait.
#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "support/hold_proxy.h"
#include "support/raw_calls.h"
#include "support/test_server.h"
#include "topk/client/regions.h"

namespace topk::server::test {
namespace {

using testing::Distribution;

// grpc.health.v1.Health/Watch on the overall status; returns once the server
// ends it.
void WatchHealth(const std::shared_ptr<grpc::Channel>& channel, std::atomic<bool>* started) {
  RawStream watch(channel, "/grpc.health.v1.Health/Watch", absl::Seconds(60));
  watch.Write("");  // service "" (overall)
  watch.WritesDone();
  bool ok = watch.Read().has_value();
  started->store(true);
  while (ok) ok = watch.Read().has_value();
  watch.Finish();
}

TEST(LameDuck, UploadsInFlightAtShutdownAreAnsweredExactly) {
  TestServer t = StartServer();
  // 8 calls of 4 MiB each, still arriving when the drain starts.
  const tools::PackedRows rows =
      Rows(Distribution::kIndexer, 16, 1 << 16, testing::LengthPattern::kFull, 9, 32);
  auto request =
      std::make_shared<const v1::SelectRequest>(client::Client::MakeRequest(32, rows.view(), {}));
  constexpr int kCalls = 8;
  absl::Mutex mu;
  int done = 0, exact = 0;
  for (int i = 0; i < kCalls; ++i) {
    t.client->SelectAsync(request, {}, [&](absl::StatusOr<client::SelectResult> result) {
      const bool ok = result.ok() && tools::Verify(rows, 32, {}, *result).ok();
      EXPECT_TRUE(ok) << result.status();
      absl::MutexLock lock(&mu);
      ++done;
      exact += ok ? 1 : 0;
    });
  }
  absl::SleepFor(absl::Milliseconds(5));
  t.server->Shutdown(absl::Seconds(20));
  absl::MutexLock lock(&mu);
  mu.AwaitWithTimeout(absl::Condition(
                          +[](int* d) { return *d == kCalls; }, &done),
                      absl::Seconds(60));
  EXPECT_EQ(done, kCalls);
  EXPECT_EQ(exact, kCalls);
}

// How the held requests travel: unary Selects, requests on one
// SelectPipeline stream opened before the hold, or one SelectStream each.
enum class CallKind { kUnary, kPipeline, kStream };

// Small requests a client sent before the drain began, whose bytes reach the
// server's handlers only after it (held back by a proxy: a slow link, or
// gRPC threads busy on a loaded host). Returns how many of the kCalls were
// answered exactly; `release_after`: how long after the drain's start the
// bytes go through.
int SmallCallsHeldAcrossTheDrain(CallKind kind, absl::Duration release_after,
                                 absl::StatusCode* refused_code) {
  constexpr int kCalls = 8;
  TestServer t = StartServer();
  HoldProxy proxy(t.server->port());
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", proxy.port()),
                                     grpc::InsecureChannelCredentials());
  client::Client via(channel);
  // 4 KB requests: below the upload grace's 64 KiB.
  const tools::PackedRows rows =
      Rows(Distribution::kIndexer, 1, 1000, testing::LengthPattern::kFull, 11, 16);
  auto request =
      std::make_shared<const v1::SelectRequest>(client::Client::MakeRequest(16, rows.view(), {}));
  EXPECT_LT(request->ByteSizeLong(), 8u << 10);
  EXPECT_TRUE(via.Select(16, rows.view()).ok());  // the connection is up
  std::unique_ptr<client::SelectPipeline> pipeline;
  if (kind == CallKind::kPipeline) {
    absl::StatusOr<std::unique_ptr<client::SelectPipeline>> opened =
        client::SelectPipeline::Open(channel);
    EXPECT_TRUE(opened.ok()) << opened.status();
    if (!opened.ok()) return 0;
    pipeline = *std::move(opened);
    EXPECT_TRUE(pipeline->Call(*request).ok());  // the stream is open on the server
  }
  proxy.Hold();
  absl::Mutex mu;
  int done = 0, exact = 0;
  const auto record = [&](const absl::StatusOr<client::SelectResult>& result) {
    const bool ok = result.ok() && tools::Verify(rows, 16, {}, *result).ok();
    absl::MutexLock lock(&mu);
    if (!result.ok()) *refused_code = result.status().code();
    ++done;
    exact += ok ? 1 : 0;
  };
  std::vector<std::thread> callers;
  for (int i = 0; i < kCalls; ++i) {
    switch (kind) {
      case CallKind::kUnary:
        via.SelectAsync(request, {}, record);
        break;
      case CallKind::kPipeline:
        EXPECT_TRUE(pipeline->Send(*request).ok());
        break;
      case CallKind::kStream:
        // Two chunks each, the first inside a float.
        callers.emplace_back([&] { record(via.SelectStreaming(16, rows.view(), {}, 2002)); });
        break;
    }
  }
  if (kind == CallKind::kPipeline) {
    callers.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        absl::StatusOr<v1::SelectReply> reply = pipeline->Receive();
        record(reply.ok() ? client::ToResult(*reply, false)
                          : absl::StatusOr<client::SelectResult>(reply.status()));
      }
    });
  }
  // Every call's score bytes have left the client.
  const auto sent = static_cast<int64_t>(kCalls * rows.scores.size() * sizeof(float));
  for (int i = 0; i < 1000 && proxy.held_bytes() < sent; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  absl::SleepFor(absl::Milliseconds(50));  // and what the last ones carry after their rows
  EXPECT_GE(proxy.held_bytes(), sent);
  std::thread drain([&] { t.server->Shutdown(absl::Seconds(20)); });
  // The drain has begun once health turns NOT_SERVING (it does so first).
  for (int i = 0; i < 1000; ++i) {
    absl::StatusOr<bool> serving = t.client->IsServing();
    if (serving.ok() && !*serving) break;
    absl::SleepFor(absl::Milliseconds(1));
  }
  absl::SleepFor(release_after);
  proxy.Release();
  {
    absl::MutexLock lock(&mu);
    mu.AwaitWithTimeout(absl::Condition(
                            +[](int* d) { return *d == kCalls; }, &done),
                        absl::Seconds(60));
    EXPECT_EQ(done, kCalls);
  }
  for (std::thread& caller : callers) caller.join();
  pipeline.reset();  // half-closes; the server ends the stream
  drain.join();
  return exact;
}

TEST(LameDuck, SmallCallsInFlightAtShutdownAreAnsweredExactly) {
  absl::StatusCode refused = absl::StatusCode::kOk;
  EXPECT_EQ(SmallCallsHeldAcrossTheDrain(CallKind::kUnary, absl::Milliseconds(20), &refused), 8)
      << "a call refused with " << absl::StatusCodeToString(refused);
}

// A SelectPipeline request gets the grace of a unary call: one its client
// sent before the drain is answered even when the stream reads it after.
TEST(LameDuck, PipelinedRequestsInFlightAtShutdownAreAnsweredExactly) {
  absl::StatusCode refused = absl::StatusCode::kOk;
  EXPECT_EQ(SmallCallsHeldAcrossTheDrain(CallKind::kPipeline, absl::Milliseconds(20), &refused), 8)
      << "a request refused with " << absl::StatusCodeToString(refused);
}

// A SelectStream its client opened and sent whole before the drain, that
// reaches its handler after it.
TEST(LameDuck, StreamsInFlightAtShutdownAreAnsweredExactly) {
  absl::StatusCode refused = absl::StatusCode::kOk;
  EXPECT_EQ(SmallCallsHeldAcrossTheDrain(CallKind::kStream, absl::Milliseconds(20), &refused), 8)
      << "a stream refused with " << absl::StatusCodeToString(refused);
}

// The same calls reaching the server past the dispatch grace are new calls.
TEST(LameDuck, SmallCallsPastTheDispatchGraceAreUnavailable) {
  absl::StatusCode refused = absl::StatusCode::kOk;
  EXPECT_EQ(
      SmallCallsHeldAcrossTheDrain(
          CallKind::kUnary, CallLimits().drain_dispatch_grace + absl::Milliseconds(300), &refused),
      0);
  EXPECT_EQ(refused, absl::StatusCode::kUnavailable);
}

TEST(LameDuck, PipelinedRequestsPastTheDispatchGraceAreUnavailable) {
  absl::StatusCode refused = absl::StatusCode::kOk;
  EXPECT_EQ(SmallCallsHeldAcrossTheDrain(
                CallKind::kPipeline, CallLimits().drain_dispatch_grace + absl::Milliseconds(300),
                &refused),
            0);
  EXPECT_EQ(refused, absl::StatusCode::kUnavailable);
}

TEST(LameDuck, NewCallsDuringTheDrainAreUnavailableAndHealthIsNotServing) {
  TestServer t = StartServer();
  auto watcher = t.NewClient();
  // An upload in progress keeps the drain open (a chunk every 100 ms).
  std::atomic<bool> started{false};
  grpc::Status uploading;
  std::thread stream([&] {
    uploading = OpenStream(t.client->channel(), 4, 15, absl::Milliseconds(100), &started);
  });
  WaitFor(started);
  std::thread drain([&] { t.server->Shutdown(absl::Seconds(20)); });
  // Past the dispatch grace (calls gRPC may have held at the drain's start).
  absl::SleepFor(CallLimits().drain_dispatch_grace + absl::Milliseconds(200));
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 2, 100);
  auto late = t.NewClient();
  const absl::Status refused = late->Select(4, rows.view()).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "retry")) << refused;
  absl::StatusOr<bool> serving = watcher->IsServing();
  ASSERT_TRUE(serving.ok()) << serving.status();
  EXPECT_FALSE(*serving);
  drain.join();
  stream.join();
}

TEST(LameDuck, AnIdleStreamAndAHealthWatchDoNotHoldTheExit) {
  TestServer t = StartServer();
  std::atomic<bool> stream_started{false}, watch_started{false};
  grpc::Status idle;
  std::thread stream(
      [&] { idle = OpenStream(t.client->channel(), 4, 0, absl::ZeroDuration(), &stream_started); });
  std::thread watch([&] { WatchHealth(t.client->channel(), &watch_started); });
  WaitFor(stream_started);
  WaitFor(watch_started);
  const absl::Time start = absl::Now();
  t.server->Shutdown(absl::Seconds(20));
  const absl::Duration took = absl::Now() - start;
  // The upload grace (2 s) plus the idle stream's second, not the deadline.
  EXPECT_LT(took, absl::Seconds(5)) << "the drain waited " << took;
  stream.join();
  watch.join();
  EXPECT_EQ(idle.error_code(), grpc::StatusCode::UNAVAILABLE) << idle.error_message();
}

TEST(LameDuck, HurryEndsTheWait) {
  TestServer t = StartServer();
  std::atomic<bool> started{false};
  // An upload that keeps sending for 30 s: it never lets the drain finish.
  std::thread stream(
      [&] { OpenStream(t.client->channel(), 4, 300, absl::Milliseconds(100), &started); });
  WaitFor(started);
  std::thread hurry([&] {
    absl::SleepFor(absl::Milliseconds(500));
    t.server->Hurry();
  });
  const absl::Time start = absl::Now();
  t.server->Shutdown(absl::Seconds(30));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  hurry.join();
  stream.join();
}

}  // namespace
}  // namespace topk::server::test
