// Dynamic coalescing on the CPU backend: compatible queued requests share one
// backend call, each still gets its own exact answer, status and timings; a
// request whose own rows are bad fails alone; a call that fails as a whole
// is served again one request at a time; the wait for batch-mates is
// bounded; --max_queue_delay_us=0 serves every request alone.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "support/fake_devices.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

using testing::Distribution;
using testing::LengthPattern;

std::unique_ptr<TestJob> Job(int64_t rows, uint64_t seed, int32_t k = 64,
                             bool return_values = false, Held held = Held::kInPlace) {
  return std::make_unique<TestJob>(
      Rows(Distribution::kIndexer, rows, 3000, LengthPattern::kRandom, seed, k), k, return_values,
      /*pinned=*/-1, held);
}

// Holds the device with one job of another K, so that what is submitted
// next waits in the queue; returns that job.
std::unique_ptr<TestJob> Occupy(Engine& engine, DeviceLog& log) {
  log.Close();
  auto blocker = Job(1, 999, /*k=*/8);
  engine.Submit(blocker.get());
  EXPECT_TRUE(log.WaitEntered(1));
  return blocker;
}

TEST(Coalescing, MixedGoodAndBadRequestsShareOneLaunchEachAnsweredExactly) {
  DeviceLog log;
  std::vector<std::unique_ptr<Device>> devices;
  devices.push_back(std::make_unique<FakeDevice>(0, &log));
  std::unique_ptr<Engine> engine = MakeEngine(std::move(devices), 1, /*max_queue_delay_us=*/1000);
  ASSERT_NE(engine, nullptr);
  std::unique_ptr<TestJob> blocker = Occupy(*engine, log);

  // K = 64 without values: 6 good requests of 1-6 rows and 2 whose rows
  // hold a NaN; then requests no K = 64 batch may take (another K, values).
  std::vector<std::unique_ptr<TestJob>> good, bad, other_k, with_values;
  for (int i = 0; i < 6; ++i) good.push_back(Job(1 + i, 10 + i));
  bad.push_back(std::make_unique<TestJob>(
      WithNan(Rows(Distribution::kIndexer, 3, 2000, LengthPattern::kFull, 30), 1), 64));
  bad.push_back(std::make_unique<TestJob>(
      WithNan(Rows(Distribution::kIndexer, 2, 2500, LengthPattern::kFull, 31), 0), 64));
  other_k.push_back(Job(2, 40, /*k=*/32));
  with_values.push_back(Job(3, 50, 64, /*return_values=*/true));
  with_values.push_back(Job(2, 51, 64, /*return_values=*/true));
  // Interleaved, so a batch must pick its mates from behind others.
  std::vector<TestJob*> order = {good[0].get(), bad[0].get(),         other_k[0].get(),
                                 good[1].get(), with_values[0].get(), good[2].get(),
                                 bad[1].get(),  good[3].get(),        with_values[1].get(),
                                 good[4].get(), good[5].get()};
  for (TestJob* job : order) engine->Submit(job);
  log.Open();
  for (TestJob* job : order) ASSERT_TRUE(job->WaitDone());
  ASSERT_TRUE(blocker->WaitDone());
  EXPECT_TRUE(blocker->Exact().ok()) << blocker->status();

  for (const auto& job : good) {
    EXPECT_TRUE(job->Exact().ok()) << job->Exact();
    EXPECT_EQ(job->timings().batch_requests, 8);
  }
  const char* expected[] = {"scores: row 1 has a NaN in its valid prefix (lengths[1] = 2000)",
                            "scores: row 0 has a NaN in its valid prefix (lengths[0] = 2500)"};
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_EQ(bad[i]->status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(bad[i]->status().message(), expected[i]);
  }
  EXPECT_TRUE(other_k[0]->Exact().ok()) << other_k[0]->Exact();
  EXPECT_EQ(other_k[0]->timings().batch_requests, 1);
  for (const auto& job : with_values) {
    EXPECT_TRUE(job->Exact().ok()) << job->Exact();
    EXPECT_EQ(job->timings().batch_requests, 2);
  }
  // The calls: the blocker, one of the eight K = 64 requests in submission
  // order, and the other two batches (in some order).
  const std::vector<Call> calls = log.calls();
  ASSERT_EQ(calls.size(), 4u);
  const std::vector<const RowSource*> k64 = {good[0]->source(), bad[0]->source(), good[1]->source(),
                                             good[2]->source(), bad[1]->source(), good[3]->source(),
                                             good[4]->source(), good[5]->source()};
  EXPECT_EQ(calls[1].parts, k64);
  const BatchSizeCounts batches = engine->devices()[0].batches;
  EXPECT_EQ(batches.calls, 4);
  EXPECT_EQ(batches.requests, 12);
  EXPECT_EQ(batches.max, 8);
  // Queue time includes the wait behind the blocker: every request waited.
  for (TestJob* job : order) EXPECT_GT(job->timings().queue_us, 0);
}

// The same with rows that must be copied: one request held off alignment
// makes the CPU backend stage the whole batch back to back instead of
// reading every request's rows in place.
TEST(Coalescing, StagedAndInPlaceRowsInOneBatch) {
  DeviceLog log;
  std::vector<std::unique_ptr<Device>> devices;
  devices.push_back(std::make_unique<FakeDevice>(0, &log));
  std::unique_ptr<Engine> engine = MakeEngine(std::move(devices), 1, 1000);
  ASSERT_NE(engine, nullptr);
  std::unique_ptr<TestJob> blocker = Occupy(*engine, log);
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 5; ++i) {
    jobs.push_back(
        Job(1 + i, 80 + i, 64, /*return_values=*/true, i == 2 ? Held::kStaged : Held::kInPlace));
  }
  jobs.push_back(std::make_unique<TestJob>(
      WithNan(Rows(Distribution::kIndexer, 2, 1500, LengthPattern::kFull, 90), 1), 64,
      /*return_values=*/true, -1, Held::kStaged));
  EXPECT_FALSE(jobs[2]->in_place());
  EXPECT_TRUE(jobs[3]->in_place());
  for (auto& job : jobs) engine->Submit(job.get());
  log.Open();
  for (auto& job : jobs) ASSERT_TRUE(job->WaitDone());
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(jobs[i]->Exact().ok()) << i << ": " << jobs[i]->Exact();
    EXPECT_EQ(jobs[i]->timings().batch_requests, 6);
  }
  EXPECT_EQ(jobs[5]->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs[5]->status().message(),
            "scores: row 1 has a NaN in its valid prefix (lengths[1] = 1500)");
  ASSERT_TRUE(blocker->WaitDone());
  ASSERT_EQ(log.calls().size(), 2u);
}

TEST(Coalescing, CallFailingAsAWholeIsServedAgainOneRequestAtATime) {
  DeviceLog log;
  auto poison = Job(2, 7);
  const RowSource* poisoned = poison->source();
  // A failure of the call as a whole (no row to blame) whenever the poison
  // request is in it.
  CallVerdict verdict = [poisoned](int32_t, const SelectRows& rows) {
    for (const RowPart& part : rows.parts) {
      if (part.source == poisoned) return absl::InvalidArgumentError("injected: call refused");
    }
    return absl::OkStatus();
  };
  std::vector<std::unique_ptr<Device>> devices;
  devices.push_back(std::make_unique<FakeDevice>(0, &log, verdict));
  std::unique_ptr<Engine> engine = MakeEngine(std::move(devices), 1, 1000);
  ASSERT_NE(engine, nullptr);
  std::unique_ptr<TestJob> blocker = Occupy(*engine, log);
  std::vector<std::unique_ptr<TestJob>> mates;
  for (int i = 0; i < 4; ++i) mates.push_back(Job(1 + i, 20 + i));
  engine->Submit(mates[0].get());
  engine->Submit(mates[1].get());
  engine->Submit(poison.get());
  engine->Submit(mates[2].get());
  engine->Submit(mates[3].get());
  log.Open();
  for (auto& job : mates) ASSERT_TRUE(job->WaitDone());
  ASSERT_TRUE(poison->WaitDone());
  for (auto& job : mates) {
    EXPECT_TRUE(job->Exact().ok()) << job->Exact();
    EXPECT_EQ(job->timings().batch_requests, 1);  // served alone, after the batch failed
  }
  EXPECT_EQ(poison->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(poison->status().message(), "injected: call refused");
  const std::vector<Call> calls = log.calls();
  ASSERT_EQ(calls.size(), 1u + 1u + 5u);  // blocker, the batch of 5, each alone
  EXPECT_EQ(calls[1].parts.size(), 5u);
  for (size_t c = 2; c < calls.size(); ++c) EXPECT_EQ(calls[c].parts.size(), 1u);
  EXPECT_TRUE(engine->usable());
}

TEST(Coalescing, WaitForBatchMatesIsBounded) {
  constexpr int64_t kDelayUs = 100'000;
  DeviceLog log;
  std::vector<std::unique_ptr<Device>> devices;
  devices.push_back(std::make_unique<FakeDevice>(0, &log));
  std::unique_ptr<Engine> engine = MakeEngine(std::move(devices), 1, kDelayUs);
  ASSERT_NE(engine, nullptr);

  // A lone request on an idle device (nothing queued, nothing served, the
  // last batch alone) has no batch-mates coming: it does not wait.
  auto lone = Job(3, 1);
  engine->Submit(lone.get());
  ASSERT_TRUE(lone->WaitDone());
  EXPECT_TRUE(lone->Exact().ok()) << lone->Exact();
  EXPECT_EQ(lone->timings().batch_requests, 1);
  EXPECT_LT(lone->timings().queue_us, kDelayUs);

  // Requests that queued up behind a busy device are concurrent: the worker
  // that takes the first waits for more until the first's delay is spent,
  // and one arriving meanwhile joins; the batch starts when the delay is
  // spent, not earlier.
  log.Close();
  auto blocker = Job(2, 9);
  engine->Submit(blocker.get());
  ASSERT_TRUE(log.WaitEntered(2));  // the lone call, then the blocker
  auto first = Job(2, 2);
  auto second = Job(4, 3);
  engine->Submit(first.get());
  engine->Submit(second.get());
  log.Open();
  absl::SleepFor(absl::Milliseconds(10));
  auto third = Job(1, 4);
  engine->Submit(third.get());
  for (auto* job : {blocker.get(), first.get(), second.get(), third.get()}) {
    ASSERT_TRUE(job->WaitDone());
    EXPECT_TRUE(job->Exact().ok()) << job->Exact();
  }
  EXPECT_EQ(blocker->timings().batch_requests, 1);
  for (auto* job : {first.get(), second.get(), third.get()}) {
    EXPECT_EQ(job->timings().batch_requests, 3);
    EXPECT_EQ(job->timings().device_us, first->timings().device_us);  // one call
  }
  EXPECT_GE(first->timings().queue_us, kDelayUs);
  EXPECT_LT(first->timings().queue_us, kDelayUs + 900'000);  // slack for a loaded CI machine
  EXPECT_LT(third->timings().queue_us, first->timings().queue_us);
  ASSERT_EQ(log.calls().size(), 3u);
}

TEST(Coalescing, WithEveryOtherWorkerBusyAWorkerTakesTheWholeBurst) {
  // Two workers, one held: the other gathers every request of a burst
  // into one launch (and the held one, once free, finds nothing left).
  DeviceLog log;
  std::vector<std::unique_ptr<Device>> devices;
  devices.push_back(std::make_unique<FakeDevice>(0, &log));
  std::unique_ptr<Engine> engine = MakeEngine(std::move(devices), 2, /*max_queue_delay_us=*/50'000);
  ASSERT_NE(engine, nullptr);
  std::unique_ptr<TestJob> blocker = Occupy(*engine, log);
  std::vector<std::unique_ptr<TestJob>> burst;
  for (int i = 0; i < 8; ++i) {
    burst.push_back(Job(1 + i % 4, 70 + i));
    engine->Submit(burst.back().get());
  }
  ASSERT_TRUE(log.WaitEntered(2));
  log.Open();
  for (auto& job : burst) {
    ASSERT_TRUE(job->WaitDone());
    EXPECT_TRUE(job->Exact().ok()) << job->Exact();
    EXPECT_EQ(job->timings().batch_requests, 8);
  }
  ASSERT_TRUE(blocker->WaitDone());
  const std::vector<Call> calls = log.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].parts.size(), 8u);
}

TEST(Coalescing, WithAnIdlePeerNoRequestWaitsForMates) {
  // An idle peer can serve whatever comes next at once: waiting would only
  // add latency.
  constexpr int64_t kDelayUs = 400'000;
  DeviceLog log;
  std::vector<std::unique_ptr<Device>> devices;
  devices.push_back(std::make_unique<FakeDevice>(0, &log));
  std::unique_ptr<Engine> engine = MakeEngine(std::move(devices), 2, kDelayUs);
  ASSERT_NE(engine, nullptr);
  auto lone = Job(3, 5);
  engine->Submit(lone.get());
  ASSERT_TRUE(lone->WaitDone());
  EXPECT_TRUE(lone->Exact().ok()) << lone->Exact();
  EXPECT_EQ(lone->timings().batch_requests, 1);
  EXPECT_LT(lone->timings().queue_us, kDelayUs / 2);
}

TEST(Coalescing, ZeroDelayServesEveryRequestAlone) {
  DeviceLog log;
  std::vector<std::unique_ptr<Device>> devices;
  devices.push_back(std::make_unique<FakeDevice>(0, &log));
  std::unique_ptr<Engine> engine = MakeEngine(std::move(devices), 1, /*max_queue_delay_us=*/0);
  ASSERT_NE(engine, nullptr);
  std::unique_ptr<TestJob> blocker = Occupy(*engine, log);
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 6; ++i) jobs.push_back(Job(1 + i % 3, 60 + i));
  for (auto& job : jobs) engine->Submit(job.get());
  log.Open();
  for (auto& job : jobs) {
    ASSERT_TRUE(job->WaitDone());
    EXPECT_TRUE(job->Exact().ok()) << job->Exact();
    EXPECT_EQ(job->timings().batch_requests, 1);
  }
  const std::vector<Call> calls = log.calls();
  ASSERT_EQ(calls.size(), 7u);
  // In submission order, one call each.
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(calls[i + 1].parts, std::vector<const RowSource*>{jobs[i]->source()});
  }
  EXPECT_EQ(engine->devices()[0].batches.max, 1);
  EXPECT_EQ(engine->devices()[0].batches.calls, 7);
}

// Through the real server: concurrent calls, some with bad rows, coalesced
// while the one worker is held; each answered on its own.
TEST(Coalescing, ThroughTheServerEachCallGetsItsOwnAnswer) {
  DeviceLog log;
  ServerOptions options = SmallOptions();
  options.backends.workers = 1;
  options.engine.max_queue_delay_us = 1000;
  options.backends.device_factory = [&log] { return std::make_unique<FakeDevice>(0, &log); };
  TestServer t = StartServer(options);
  ASSERT_NE(t.client, nullptr);
  log.Close();
  // The first call holds the worker; the rest queue behind it.
  absl::Mutex mu;
  int done = 0;
  std::vector<absl::StatusOr<client::SelectResult>> results(12, absl::UnknownError("not done"));
  std::vector<tools::PackedRows> rows;
  for (int i = 0; i < 12; ++i) {
    tools::PackedRows r =
        Rows(Distribution::kIndexer, 1 + i % 4, 4000, LengthPattern::kFull, 100 + i);
    rows.push_back(i % 4 == 3 ? WithNan(std::move(r), 3) : std::move(r));
  }
  auto send = [&](int i) {
    auto request = std::make_shared<const v1::SelectRequest>(
        client::Client::MakeRequest(64, rows[i].view(), {}));
    t.client->SelectAsync(request, {}, [&, i](absl::StatusOr<client::SelectResult> result) {
      absl::MutexLock lock(&mu);
      results[i] = std::move(result);
      ++done;
    });
  };
  send(0);
  ASSERT_TRUE(log.WaitEntered(1));
  for (int i = 1; i < 12; ++i) send(i);
  // Every other call is queued before the worker is let go.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (t.server->engine().queue_depth() < 11 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_EQ(t.server->engine().queue_depth(), 11);
  log.Open();
  {
    absl::MutexLock lock(&mu);
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(
                                        +[](int* d) { return *d == 12; }, &done),
                                    absl::Seconds(60)));
  }
  int most = 0;
  for (int i = 0; i < 12; ++i) {
    if (i % 4 == 3) {
      EXPECT_EQ(results[i].status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_TRUE(absl::StrContains(results[i].status().message(), "scores: row 3 has a NaN"))
          << results[i].status();
      continue;
    }
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status();
    EXPECT_TRUE(tools::Verify(rows[i], 64, {}, *results[i]).ok()) << i;
    most = std::max(most, results[i]->server.batch_requests);
  }
  EXPECT_EQ(results[0]->server.batch_requests, 1);
  EXPECT_EQ(most, 11);  // the eleven queued calls shared one launch
  absl::StatusOr<v1::Stats> stats = t.client->GetStats(/*include_prometheus_text=*/true);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->batch_requests().calls(), 2u);
  EXPECT_EQ(stats->batch_requests().requests(), 12u);
  EXPECT_EQ(stats->batch_requests().max(), 11u);
  EXPECT_TRUE(absl::StrContains(stats->prometheus_text(),
                                "topk_batch_requests_bucket{device=\"0\",le=\"16\"} 2"))
      << stats->prometheus_text();
}

// The serving backend itself (the CPU in CI; TOPK_TEST_BACKEND=cuda runs it
// on a GPU: staging of several requests into one upload, one launch, the
// answers and values split back): concurrent calls of mixed shapes, some
// with bad rows, each answered exactly.
TEST(Coalescing, ServingBackendAnswersEveryCoalescedCallExactly) {
  ServerOptions options = SmallOptions();
  options.backends.workers = 1;
  options.engine.max_queue_delay_us = 5000;
  TestServer t = StartServer(options);
  ASSERT_NE(t.client, nullptr);
  constexpr int kCalls = 24;
  std::vector<tools::PackedRows> rows;
  std::vector<bool> with_values, bad;
  for (int i = 0; i < kCalls; ++i) {
    tools::PackedRows r = Rows(i % 3 == 0 ? Distribution::kBf16Ties : Distribution::kIndexer,
                               1 + i % 5, 1000 + 700 * (i % 4), LengthPattern::kFull, 200 + i);
    bad.push_back(i % 7 == 6);
    with_values.push_back(i % 2 == 1);
    rows.push_back(bad.back() ? WithNan(std::move(r), i % 5) : std::move(r));
  }
  absl::Mutex mu;
  int done = 0;
  std::vector<absl::StatusOr<client::SelectResult>> results(kCalls, absl::UnknownError("not done"));
  for (int i = 0; i < kCalls; ++i) {
    auto request = std::make_shared<const v1::SelectRequest>(
        client::Client::MakeRequest(128, rows[i].view(), {.return_values = with_values[i]}));
    t.client->SelectAsync(request, {.return_values = with_values[i]},
                          [&, i](absl::StatusOr<client::SelectResult> result) {
                            absl::MutexLock lock(&mu);
                            results[i] = std::move(result);
                            ++done;
                          });
  }
  {
    absl::MutexLock lock(&mu);
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(
                                        +[](int* d) { return *d == kCalls; }, &done),
                                    absl::Seconds(60)));
  }
  int most = 0;
  for (int i = 0; i < kCalls; ++i) {
    if (bad[i]) {
      EXPECT_EQ(results[i].status().code(), absl::StatusCode::kInvalidArgument) << i;
      EXPECT_TRUE(absl::StrContains(results[i].status().message(),
                                    absl::StrCat("scores: row ", i % 5, " has a NaN")))
          << results[i].status();
      continue;
    }
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status();
    const client::SelectResult& result = *results[i];
    EXPECT_TRUE(tools::Verify(rows[i], 128, {}, result).ok()) << i;
    ASSERT_EQ(result.values.size(), with_values[i] ? result.indices.size() : 0u) << i;
    for (size_t s = 0; s < result.values.size(); ++s) {
      const int32_t index = result.indices[s];
      const float expected = rows[i].scores[rows[i].offsets[s / 128] + index];
      ASSERT_TRUE(index < 0 ? std::isnan(result.values[s]) : result.values[s] == expected)
          << "call " << i << " slot " << s;
    }
    EXPECT_GE(result.server.batch_requests, 1);
    most = std::max(most, result.server.batch_requests);
  }
  EXPECT_GT(most, 1);  // 24 calls within the first one's 5 ms: some shared a launch
}

}  // namespace
}  // namespace topk::server::test
