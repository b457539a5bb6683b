// The CPU backend's worker on its own (no engine, no gRPC): a batch of
// several parts is read in place when every part is aligned floats (rows
// addressed across separate buffers) and staged back to back otherwise, and
// both give the same exact answer; a NaN row is reported on that row only;
// a plan needing more workspace than the worker has is refused.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/backends/cpu_backend.h"
#include "server/backends/plan_buckets.h"

namespace topk::server::test {
namespace {

constexpr RequestLimits kLimits{
    .max_k = 8, .max_rows = 8, .max_width = 64, .max_batch_bytes = 4096};

std::unique_ptr<WorkerBackend> CpuWorker() {
  absl::StatusOr<std::unique_ptr<WorkerBackend>> worker =
      MakeCpuDevice(1, 1)->CreateWorker(kLimits);
  EXPECT_TRUE(worker.ok()) << worker.status();
  return worker.ok() ? *std::move(worker) : nullptr;
}

// A part's floats in a buffer of its own, `shift` bytes into it (1: not
// float-aligned, so the worker must copy it).
struct Part {
  Part(std::vector<float> values, size_t shift)
      : bytes(shift + values.size() * sizeof(float), '\0'),
        source(absl::string_view(bytes.data() + shift, values.size() * sizeof(float))) {
    std::memcpy(bytes.data() + shift, values.data(), values.size() * sizeof(float));
  }
  std::string bytes;
  ContiguousRows source;
};

struct Answer {
  absl::Status status;
  std::vector<int32_t> indices;
  std::vector<RowStatus> rows;
};

// Rows: part a holds rows {5, 1, 9, 3} and {2, 8}; part b holds {7, 6, 4}.
Answer SelectTwoParts(WorkerBackend& worker, Part& a, Part& b) {
  const int32_t lengths[] = {4, 2, 3};
  const int64_t offsets[] = {0, 4, 6};
  const RowPart parts[] = {
      {.source = &a.source, .num_rows = 2, .element_offset = 0},
      {.source = &b.source, .first_row = 2, .num_rows = 1, .element_offset = 6}};
  const SelectRows rows{.parts = parts,
                        .lengths = lengths,
                        .row_offsets = offsets,
                        .num_rows = 3,
                        .total_elements = 9};
  Answer answer{.indices = std::vector<int32_t>(3 * 2, -7),
                .rows = std::vector<RowStatus>(3, RowStatus::kBadLength)};
  absl::StatusOr<Plan> plan = worker.MakePlan(
      {.k = 2, .max_rows = 4, .max_width = 4, .layout = Layout::kPacked}, {.sorted = true});
  if (!plan.ok()) return {.status = plan.status()};
  answer.status = worker.Select(
      *plan, rows, {.indices = answer.indices.data(), .row_status = answer.rows.data()});
  return answer;
}

TEST(CpuWorker, ABatchOfSeparateBuffersIsAnsweredInPlaceAndStagedAlike) {
  std::unique_ptr<WorkerBackend> worker = CpuWorker();
  ASSERT_NE(worker, nullptr);
  const std::vector<int32_t> expected = {2, 0, 1, 0, 0, 1};  // sorted, per row
  for (size_t shift : {0, 1}) {                              // in place, then staged
    Part a({5, 1, 9, 3, 2, 8}, 0), b({7, 6, 4}, shift);
    const Answer answer = SelectTwoParts(*worker, a, b);
    ASSERT_TRUE(answer.status.ok()) << answer.status;
    EXPECT_EQ(answer.indices, expected) << "shift " << shift;
    EXPECT_EQ(answer.rows, std::vector<RowStatus>(3, RowStatus::kOk));
  }
}

TEST(CpuWorker, ANanRowIsReportedOnThatRowOnly) {
  std::unique_ptr<WorkerBackend> worker = CpuWorker();
  ASSERT_NE(worker, nullptr);
  Part a({5, 1, 9, 3, 2, 8}, 0), b({7, std::nanf(""), 4}, 0);
  const Answer answer = SelectTwoParts(*worker, a, b);
  ASSERT_TRUE(answer.status.ok()) << answer.status;
  EXPECT_EQ(answer.rows[0], RowStatus::kOk);
  EXPECT_EQ(answer.rows[1], RowStatus::kOk);
  EXPECT_EQ(answer.rows[2], RowStatus::kNan);
  EXPECT_EQ(answer.indices[0], 2);
}

TEST(CpuWorker, APlanNeedingMoreWorkspaceThanAllocatedIsRefused) {
  std::unique_ptr<WorkerBackend> worker = CpuWorker();
  ASSERT_NE(worker, nullptr);
  absl::StatusOr<Plan> plan =
      worker->MakePlan({.k = 2, .max_rows = 4, .max_width = 4, .layout = Layout::kPacked}, {});
  ASSERT_TRUE(plan.ok());
  plan->workspace_bytes = size_t{1} << 40;
  Part a({1, 2}, 0);
  const int32_t lengths[] = {2};
  const int64_t offsets[] = {0};
  const RowPart part{.source = &a.source, .num_rows = 1};
  int32_t indices[2];
  RowStatus status[1];
  const absl::Status refused = worker->Select(*plan,
                                              {.parts = {&part, 1},
                                               .lengths = lengths,
                                               .row_offsets = offsets,
                                               .num_rows = 1,
                                               .total_elements = 2},
                                              {.indices = indices, .row_status = status});
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("workspace"), absl::string_view::npos) << refused;
}

}  // namespace
}  // namespace topk::server::test
