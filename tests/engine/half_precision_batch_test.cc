// Coalescing with score types (issue 13): queued requests of FP32, BF16 and
// FP16 rows with the same K and options are batched only with requests of
// their own type (a batch is one selector run over one element type), and
// each gets its exact answer, with values in its own type.
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "support/fake_devices.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

using testing::Distribution;
using testing::LengthPattern;

std::unique_ptr<TestJob> TypedJob(ScoreType dtype, int64_t rows, uint64_t seed, Held held) {
  return std::make_unique<TestJob>(tools::Generate({.distribution = Distribution::kBf16Ties,
                                                    .lengths = LengthPattern::kRandom,
                                                    .rows = rows,
                                                    .width = 3000,
                                                    .k = 64,
                                                    .seed = seed,
                                                    .dtype = dtype}),
                                   64, /*return_values=*/true, /*pinned=*/-1, held);
}

TEST(HalfPrecisionBatches, EachTypeIsBatchedWithItsOwnAndAnsweredExactly) {
  for (Held held : {Held::kInPlace, Held::kStaged}) {
    DeviceLog log;
    std::vector<std::unique_ptr<Device>> devices;
    devices.push_back(std::make_unique<FakeDevice>(0, &log));
    std::unique_ptr<Engine> engine = MakeEngine(std::move(devices), 1, /*max_queue_delay_us=*/1000);
    ASSERT_NE(engine, nullptr);
    // Hold the device with a job of another K so the rest queue up.
    log.Close();
    auto blocker = std::make_unique<TestJob>(
        Rows(Distribution::kIndexer, 1, 3000, LengthPattern::kRandom, 999, 8), 8);
    engine->Submit(blocker.get());
    ASSERT_TRUE(log.WaitEntered(1));

    // Interleaved types; odd row counts, so 16-bit parts have odd element
    // counts and the next part's offset depends on the rounding.
    const ScoreType types[] = {ScoreType::kBFloat16, ScoreType::kFloat32, ScoreType::kFloat16};
    std::vector<std::unique_ptr<TestJob>> jobs;
    for (int i = 0; i < 9; ++i) jobs.push_back(TypedJob(types[i % 3], 1 + i % 4, 20 + i, held));
    for (const auto& job : jobs) engine->Submit(job.get());
    log.Open();
    for (const auto& job : jobs) ASSERT_TRUE(job->WaitDone());
    ASSERT_TRUE(blocker->WaitDone());
    for (const auto& job : jobs) {
      EXPECT_TRUE(job->Exact().ok()) << ScoreTypeName(job->input().dtype) << ": " << job->Exact();
      EXPECT_EQ(job->timings().batch_requests, 3);  // the three of its type
    }
    // The blocker, then one call per type holding only that type's jobs.
    const std::vector<Call> calls = log.calls();
    ASSERT_EQ(calls.size(), 4u);
    for (size_t c = 1; c < calls.size(); ++c) {
      ASSERT_EQ(calls[c].parts.size(), 3u);
      ScoreType type = ScoreType::kFloat32;
      for (const auto& job : jobs) {
        if (job->source() == calls[c].parts.front()) type = job->input().dtype;
      }
      for (const RowSource* part : calls[c].parts) {
        for (const auto& job : jobs) {
          if (job->source() == part) {
            EXPECT_EQ(job->input().dtype, type);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace topk::server::test
