// The engine against a scripted backend (tests/support/scripted_backend.h):
// how it lays a coalesced batch out and splits the answer back, which jobs it
// refuses to batch, the statuses it gives (rows named as the job numbered
// them, a full queue, a stopped engine, a lost device), and the plan keys it
// asks for. No selector runs: each test takes milliseconds.
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "support/scripted_backend.h"

namespace topk::server::test {
namespace {

// One device, one worker, coalescing on; the worker held by a blocker job so
// that what is submitted next waits in the queue together.
struct HeldEngine {
  explicit HeldEngine(ScriptedEngineOptions options = {.max_queue_delay_us = 1000}) {
    absl::StatusOr<std::unique_ptr<Engine>> made = MakeScriptedEngine(&script, options);
    EXPECT_TRUE(made.ok()) << made.status();
    if (made.ok()) engine = *std::move(made);
  }
  ~HeldEngine() {
    script.Open();
    if (engine) engine->Stop();
  }
  // Holds the worker inside a backend call (a job of K = 1, compatible with
  // nothing the tests submit).
  void Hold() {
    script.Close();
    engine->Submit(&blocker);
    ASSERT_TRUE(script.WaitEntered(1));
  }
  // Lets the held call and everything after it through.
  void Release() { script.Open(); }

  Script script;
  ScriptedJob blocker{{1}, 1};
  std::unique_ptr<Engine> engine;
};

TEST(EngineScripted, ACoalescedBatchIsLaidOutBackToBackAndSplitBack) {
  HeldEngine t;
  ASSERT_NO_FATAL_FAILURE(t.Hold());
  ScriptedJob a({3, 5}, 4), b({2}, 4), c({4, 0, 1}, 4);
  for (ScriptedJob* job : {&a, &b, &c}) t.engine->Submit(job);
  t.Release();
  for (ScriptedJob* job : {&a, &b, &c}) ASSERT_TRUE(job->WaitDone());

  const std::vector<ScriptedCall> calls = t.script.calls();
  ASSERT_EQ(calls.size(), 2u);  // the blocker, then one call for all three
  const ScriptedCall& batch = calls[1];
  ASSERT_EQ(batch.parts.size(), 3u);
  EXPECT_EQ(batch.parts[0].source, a.source());
  EXPECT_EQ(batch.parts[1].source, b.source());
  EXPECT_EQ(batch.parts[2].source, c.source());
  // Rows numbered over the batch; each source starts where the last ended.
  EXPECT_EQ(batch.parts[1].first_row, 2);
  EXPECT_EQ(batch.parts[2].first_row, 3);
  EXPECT_EQ(batch.parts[1].element_offset, 8);
  EXPECT_EQ(batch.parts[2].element_offset, 10);
  EXPECT_EQ(batch.total_elements, 15);
  EXPECT_EQ(batch.lengths, (std::vector<int32_t>{3, 5, 2, 4, 0, 1}));
  EXPECT_EQ(batch.row_offsets, (std::vector<int64_t>{0, 3, 8, 10, 14, 14}));
  // The plan's bucket: 6 rows -> 8, the longest row 5 -> 8.
  EXPECT_EQ(batch.key.k, 4);
  EXPECT_EQ(batch.key.max_rows, 8);
  EXPECT_EQ(batch.key.max_width, 8);

  // Each job gets its own rows of the answer (row r of the batch holds
  // r * 1000 + j), and knows it shared the call.
  const auto rows_of = [](int64_t first, int64_t count) {
    std::vector<int32_t> expected;
    for (int64_t r = first; r < first + count; ++r) {
      for (int32_t j = 0; j < 4; ++j) expected.push_back(static_cast<int32_t>(r * 1000 + j));
    }
    return expected;
  };
  EXPECT_EQ(a.indices(), rows_of(0, 2));
  EXPECT_EQ(b.indices(), rows_of(2, 1));
  EXPECT_EQ(c.indices(), rows_of(3, 3));
  for (ScriptedJob* job : {&a, &b, &c}) {
    EXPECT_TRUE(job->status().ok()) << job->status();
    EXPECT_EQ(job->batch_requests(), 3);
    EXPECT_EQ(job->completions(), 1);
  }
  const EngineDevice device = t.engine->devices()[0];
  EXPECT_EQ(device.batches.calls, 2);
  EXPECT_EQ(device.batches.requests, 4);
  EXPECT_EQ(device.batches.max, 3);
}

// A bad row fails its own job only, named as that job numbered it (not by
// its place in the batch), and with the length the job gave.
TEST(EngineScripted, ABadRowFailsOnlyItsJobNamedByTheJobsOwnRowNumber) {
  HeldEngine t;
  // Call 1 is the batch: its row 3 is b's row 1, its row 4 is c's row 0.
  t.script.FailRowsOfCall(1, {{3, RowStatus::kNan}, {4, RowStatus::kBadLength}});
  ASSERT_NO_FATAL_FAILURE(t.Hold());
  ScriptedJob a({3, 5}, 4), b({2, 7}, 4), c({6}, 4);
  for (ScriptedJob* job : {&a, &b, &c}) t.engine->Submit(job);
  t.Release();
  for (ScriptedJob* job : {&a, &b, &c}) ASSERT_TRUE(job->WaitDone());
  ASSERT_EQ(t.script.calls().size(), 2u);
  EXPECT_TRUE(a.status().ok()) << a.status();
  EXPECT_EQ(a.indices().size(), 8u);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.status().message(), "scores: row 1 has a NaN in its valid prefix (lengths[1] = 7)");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), "lengths[0] = 6 was rejected by the backend (row 0)");
}

// Jobs one plan cannot serve together are separate calls, even when queued
// together: another K, another score type.
TEST(EngineScripted, IncompatibleQueuedJobsAreServedInSeparateCalls) {
  HeldEngine t;
  ASSERT_NO_FATAL_FAILURE(t.Hold());
  ScriptedJob a({4}, 4), other_k({4}, 8), bf16({4}, 4, ScoreType::kBFloat16), d({4}, 4);
  for (ScriptedJob* job : {&a, &other_k, &bf16, &d}) t.engine->Submit(job);
  t.Release();
  for (ScriptedJob* job : {&a, &other_k, &bf16, &d}) {
    ASSERT_TRUE(job->WaitDone());
    EXPECT_TRUE(job->status().ok()) << job->status();
  }
  const std::vector<ScriptedCall> calls = t.script.calls();
  ASSERT_EQ(calls.size(), 4u);  // blocker; a with d; other_k; bf16
  ASSERT_EQ(calls[1].parts.size(), 2u);
  EXPECT_EQ(calls[1].parts[0].source, a.source());
  EXPECT_EQ(calls[1].parts[1].source, d.source());
  EXPECT_EQ(calls[2].key.k, 8);
  EXPECT_EQ(calls[3].dtype, ScoreType::kBFloat16);
  EXPECT_EQ(calls[3].key.dtype, ScoreType::kBFloat16);  // planned in its own type
  EXPECT_EQ(a.batch_requests(), 2);
  EXPECT_EQ(bf16.batch_requests(), 1);
}

// A batch holds at most max_rows rows: the job that would pass it waits for
// the next call.
TEST(EngineScripted, ABatchStopsAtTheRowLimit) {
  ScriptedEngineOptions options{.max_queue_delay_us = 1000};
  options.limits.max_rows = 4;
  HeldEngine t(options);
  ASSERT_NO_FATAL_FAILURE(t.Hold());
  ScriptedJob a({1, 1, 1}, 4), b({1, 1}, 4), c({1}, 4);
  for (ScriptedJob* job : {&a, &b, &c}) t.engine->Submit(job);
  t.Release();
  for (ScriptedJob* job : {&a, &b, &c}) ASSERT_TRUE(job->WaitDone());
  const std::vector<ScriptedCall> calls = t.script.calls();
  ASSERT_EQ(calls.size(), 3u);  // blocker; a with c (4 rows); b
  ASSERT_EQ(calls[1].parts.size(), 2u);
  EXPECT_EQ(calls[1].parts[1].source, c.source());
  EXPECT_EQ(calls[2].parts[0].source, b.source());
}

// Coalescing off: every job is its own call, however many wait together.
TEST(EngineScripted, ZeroDelayNeverBatches) {
  HeldEngine t({.max_queue_delay_us = 0});
  ASSERT_NO_FATAL_FAILURE(t.Hold());
  ScriptedJob a({4}, 4), b({4}, 4);
  t.engine->Submit(&a);
  t.engine->Submit(&b);
  t.Release();
  ASSERT_TRUE(a.WaitDone() && b.WaitDone());
  EXPECT_EQ(t.script.calls().size(), 3u);
  EXPECT_EQ(a.batch_requests(), 1);
}

// Backpressure: a full queue completes the job at once, on the submitting
// thread, with RESOURCE_EXHAUSTED naming the depth and the flag to raise.
TEST(EngineScripted, AFullQueueAnswersResourceExhaustedAtOnce) {
  HeldEngine t({.queue_depth = 2, .max_queue_delay_us = 0});
  ASSERT_NO_FATAL_FAILURE(t.Hold());
  ScriptedJob a({4}, 4), b({4}, 4), refused({4}, 4);
  t.engine->Submit(&a);
  t.engine->Submit(&b);
  EXPECT_EQ(t.engine->queue_depth(), 2);
  EXPECT_EQ(t.engine->in_flight(), 1);  // the blocker
  t.engine->Submit(&refused);
  ASSERT_EQ(refused.completions(), 1);  // before Submit returned
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "(2 requests waiting)"))
      << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "--queue_depth"));
  t.Release();
  ASSERT_TRUE(a.WaitDone() && b.WaitDone());
  EXPECT_TRUE(a.status().ok() && b.status().ok());
  EXPECT_EQ(refused.completions(), 1);
}

// Stop drains what is queued, then refuses.
TEST(EngineScripted, StopAnswersWhatIsQueuedThenRefusesWithUnavailable) {
  HeldEngine t;
  ASSERT_NO_FATAL_FAILURE(t.Hold());
  ScriptedJob queued({4}, 4);
  t.engine->Submit(&queued);
  t.Release();
  t.engine->Stop();
  EXPECT_EQ(queued.completions(), 1);
  EXPECT_TRUE(queued.status().ok()) << queued.status();
  ScriptedJob late({4}, 4);
  t.engine->Submit(&late);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(late.status().message(), "shutting down")) << late.status();
}

// An UNAVAILABLE from the backend is a device error: sticky, the device is
// no longer used, later jobs are refused without a backend call.
TEST(EngineScripted, ADeviceErrorIsStickyAndLaterJobsAreRefused) {
  HeldEngine t({.max_queue_delay_us = 0});
  t.script.SetCallStatus(absl::UnavailableError("the GPU fell off the bus"));
  ScriptedJob first({4}, 4);
  t.engine->Submit(&first);
  ASSERT_TRUE(first.WaitDone());
  EXPECT_EQ(first.status(), absl::UnavailableError("the GPU fell off the bus"));
  EXPECT_FALSE(t.engine->usable());
  EXPECT_FALSE(t.engine->devices()[0].usable);
  ScriptedJob later({4}, 4);
  t.engine->Submit(&later);
  EXPECT_EQ(later.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(later.status().message(), "no usable device")) << later.status();
  EXPECT_EQ(t.script.calls().size(), 1u);
}

// Any other error of a call fails that job alone; the device stays usable.
TEST(EngineScripted, AnotherCallErrorFailsTheJobOnly) {
  HeldEngine t({.max_queue_delay_us = 0});
  t.script.SetCallStatus(absl::InternalError("one bad launch"));
  ScriptedJob job({4}, 4);
  t.engine->Submit(&job);
  ASSERT_TRUE(job.WaitDone());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(t.engine->usable());
}

// A job pinned to a device the engine does not serve names that device.
TEST(EngineScripted, AJobPinnedToAnUnservedDeviceIsRefusedNamingIt) {
  HeldEngine t({.devices = 2, .max_queue_delay_us = 0});
  ScriptedJob pinned({4}, 4, ScoreType::kFloat32, /*pinned=*/5);
  t.engine->Submit(&pinned);
  EXPECT_EQ(pinned.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(pinned.status().message(), "device 5")) << pinned.status();
  ScriptedJob on_one({4}, 4, ScoreType::kFloat32, /*pinned=*/1);
  t.engine->Submit(&on_one);
  ASSERT_TRUE(on_one.WaitDone());
  EXPECT_TRUE(on_one.status().ok()) << on_one.status();
}

// The plan cache through the engine: one plan per bucket and type, counted
// per device; rows of one bucket but another type plan again.
TEST(EngineScripted, PlansAreCachedPerBucketAndScoreType) {
  HeldEngine t({.max_queue_delay_us = 0});
  const auto serve = [&](std::vector<int32_t> lengths, ScoreType dtype) {
    ScriptedJob job(std::move(lengths), 4, dtype);
    t.engine->Submit(&job);
    EXPECT_TRUE(job.WaitDone());
    EXPECT_TRUE(job.status().ok()) << job.status();
  };
  serve({100, 120}, ScoreType::kFloat32);  // bucket 2 rows x 128
  serve({128}, ScoreType::kFloat32);       // 1 row: another bucket
  serve({90, 65}, ScoreType::kFloat32);    // 2 x 128 again: a hit
  serve({100, 120}, ScoreType::kBFloat16);
  serve({100, 120}, ScoreType::kFloat16);
  serve({70, 127}, ScoreType::kBFloat16);  // BF16's 2 x 128: a hit
  const std::vector<PlanKey> made = t.script.plans_made();
  ASSERT_EQ(made.size(), 4u);
  EXPECT_EQ(made[0], (PlanKey{.k = 4, .max_rows = 2, .max_width = 128}));
  EXPECT_EQ(made[1], (PlanKey{.k = 4, .max_rows = 1, .max_width = 128}));
  EXPECT_EQ(made[2].dtype, ScoreType::kBFloat16);
  EXPECT_EQ(made[3].dtype, ScoreType::kFloat16);
  const EngineDevice device = t.engine->devices()[0];
  EXPECT_EQ(device.plan_cache_misses, 4);
  EXPECT_EQ(device.plan_cache_hits, 2);
}

// A bucket the backend cannot plan fails its job with the planner's status.
TEST(EngineScripted, APlanningErrorFailsTheJobWithItsStatus) {
  HeldEngine t({.max_queue_delay_us = 0});
  t.script.FailPlansOfK(7, absl::InvalidArgumentError("k = 7: no route"));
  ScriptedJob job({4}, 7);
  t.engine->Submit(&job);
  ASSERT_TRUE(job.WaitDone());
  EXPECT_EQ(job.status(), absl::InvalidArgumentError("k = 7: no route"));
  EXPECT_TRUE(t.script.calls().empty());
  EXPECT_TRUE(t.engine->usable());
}

TEST(EngineScripted, CreateRefusesOptionsItCannotServe) {
  Script script;
  const auto refused = [&](ScriptedEngineOptions options) {
    return MakeScriptedEngine(&script, options).status();
  };
  EXPECT_EQ(refused({.queue_depth = 0}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused({.queue_depth = 0}).message(), "--queue_depth"));
  EXPECT_TRUE(
      absl::StrContains(refused({.max_queue_delay_us = -1}).message(), "--max_queue_delay_us"));
  EXPECT_EQ(refused({.devices = 0}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused({.workers_per_device = 0}).code(), absl::StatusCode::kInvalidArgument);
  ScriptedEngineOptions no_k;
  no_k.limits.max_k = 0;
  EXPECT_TRUE(absl::StrContains(refused(no_k).message(), "--max_k"));
}

}  // namespace
}  // namespace topk::server::test
