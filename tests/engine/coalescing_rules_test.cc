// The coalescing rules (server/engine/coalescing.h) as pure functions: which
// inputs one plan and one backend call can serve together, and the footprint
// that bounds a batch by rows, jobs and staged bytes. Each rule is broken
// one field at a time, so a rule that stopped being checked fails here.
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/engine/coalescing.h"

namespace topk::server::test {
namespace {

// Host rows of `bytes` bytes (the contents are never read here).
struct Input {
  explicit Input(size_t bytes, std::vector<int32_t> row_lengths = {4, 4})
      : buffer(bytes, '\0'), source(buffer), lengths(std::move(row_lengths)) {
    input.k = 4;
    input.lengths = lengths;
    input.rows = &source;
    input.max_length = 4;
    input.num_rows = static_cast<int64_t>(lengths.size());
  }
  std::string buffer;
  ContiguousRows source;
  std::vector<int32_t> lengths;
  SelectInput input;
};

constexpr RequestLimits kLimits{
    .max_k = 64, .max_rows = 8, .max_width = 1024, .max_batch_bytes = 1024};

TEST(CoalescingRules, IdenticalInputsAreCompatible) {
  Input a(32), b(32);
  EXPECT_TRUE(Compatible(a.input, b.input));
}

TEST(CoalescingRules, EveryPlanFieldMustMatch) {
  Input lead(32);
  const auto differs = [&](auto change) {
    Input other(32);
    change(other.input);
    return !Compatible(lead.input, other.input);
  };
  EXPECT_TRUE(differs([](SelectInput& in) { in.k = 5; }));
  EXPECT_TRUE(differs([](SelectInput& in) { in.options.sorted = true; }));
  EXPECT_TRUE(differs([](SelectInput& in) { in.options.deterministic = true; }));
  EXPECT_TRUE(differs([](SelectInput& in) { in.return_values = true; }));
  EXPECT_TRUE(differs([](SelectInput& in) { in.dtype = ScoreType::kBFloat16; }));
  EXPECT_TRUE(differs([](SelectInput& in) { in.device_ordinal = 1; }));  // pinned elsewhere
  // Lengths and row counts may differ: they are what a batch concatenates.
  EXPECT_FALSE(differs([](SelectInput& in) { in.max_length = 3; }));
}

TEST(CoalescingRules, RowsOnAnotherKindOfSourceDoNotMix) {
  Input host(32);
  std::string gpu_bytes(32, '\0');
  RegionRows on_gpu(reinterpret_cast<const std::byte*>(gpu_bytes.data()), gpu_bytes.size(), 0);
  Input gpu(32);
  gpu.input.rows = &on_gpu;
  EXPECT_FALSE(Compatible(host.input, gpu.input));
  EXPECT_FALSE(Compatible(gpu.input, host.input));
}

TEST(CoalescingRules, AnswersGoingToDifferentKindsOfPlaceDoNotMix) {
  Input response(32), host_target(32), device_target(32);
  OutputTarget host{.row_stride = 4, .device_ordinal = -1};
  OutputTarget device{.row_stride = 4, .device_ordinal = 0};
  host_target.input.output_target = &host;
  device_target.input.output_target = &device;
  EXPECT_FALSE(Compatible(response.input, host_target.input));
  EXPECT_FALSE(Compatible(response.input, device_target.input));
  EXPECT_FALSE(Compatible(host_target.input, device_target.input));
  // Two host targets (different regions) are one kind of place.
  OutputTarget other_host{.row_stride = 8, .device_ordinal = -1};
  Input second_host(32);
  second_host.input.output_target = &other_host;
  EXPECT_TRUE(Compatible(host_target.input, second_host.input));
}

// Lengths on the GPU: all or none, and then one width bound for the batch
// (the selector refuses any row longer than it).
TEST(CoalescingRules, DeviceLengthsNeedTheSameWidthBound) {
  const int32_t device_lengths[2] = {4, 4};
  Input a(32), b(32), host(32);
  a.input.device_lengths = device_lengths;
  b.input.device_lengths = device_lengths;
  EXPECT_TRUE(Compatible(a.input, b.input));
  EXPECT_FALSE(Compatible(a.input, host.input));
  b.input.max_length = 8;
  EXPECT_FALSE(Compatible(a.input, b.input));
}

TEST(CoalescingRules, StagedBytesRoundEachSourceUpToWholeFloats) {
  Input fp32(10);  // 2.5 floats: 3 floats staged
  EXPECT_EQ(SourceElements(fp32.input), 3);
  EXPECT_EQ(StagedBytes(fp32.input), 12);
  Input bf16(6);  // three BF16 elements = 1.5 floats: 2 floats, 4 elements
  bf16.input.dtype = ScoreType::kBFloat16;
  EXPECT_EQ(SourceElements(bf16.input), 4);
  EXPECT_EQ(StagedBytes(bf16.input), 8);
  // Rows on a GPU are read there: nothing staged.
  std::string gpu_bytes(64, '\0');
  RegionRows on_gpu(reinterpret_cast<const std::byte*>(gpu_bytes.data()), gpu_bytes.size(), 0);
  Input gpu(64);
  gpu.input.rows = &on_gpu;
  EXPECT_EQ(StagedBytes(gpu.input), 0);
}

TEST(CoalescingRules, AddCountsJobsRowsAndStagedBytes) {
  Input a(32, {4, 4}), b(20, {3, 2});
  BatchFootprint batch;
  Add(a.input, batch);
  Add(b.input, batch);
  EXPECT_EQ(batch.jobs, 2);
  EXPECT_EQ(batch.rows, 4);
  EXPECT_EQ(batch.staged_bytes, 32 + 20);
}

TEST(CoalescingRules, CanJoinStopsAtTheRowLimit) {
  Input lead(32, std::vector<int32_t>(6, 1)), other(8, {1, 1});
  BatchFootprint batch;
  Add(lead.input, batch);
  EXPECT_TRUE(CanJoin(lead.input, other.input, batch, kLimits, 10));  // 6 + 2 = max_rows
  Input three(12, {1, 1, 1});
  EXPECT_FALSE(CanJoin(lead.input, three.input, batch, kLimits, 10));  // 9 rows
}

TEST(CoalescingRules, CanJoinStopsAtTheStagedByteLimit) {
  Input lead(1000), small(24), big(28);
  BatchFootprint batch;
  Add(lead.input, batch);
  EXPECT_TRUE(CanJoin(lead.input, small.input, batch, kLimits, 10));  // 1024 bytes
  EXPECT_FALSE(CanJoin(lead.input, big.input, batch, kLimits, 10));   // 1028 bytes
}

TEST(CoalescingRules, CanJoinStopsAtTheJobLimitAndOnIncompatibleInputs) {
  Input lead(8), other(8);
  BatchFootprint batch;
  Add(lead.input, batch);
  EXPECT_TRUE(CanJoin(lead.input, other.input, batch, kLimits, 2));
  Add(other.input, batch);
  EXPECT_FALSE(CanJoin(lead.input, other.input, batch, kLimits, 2));
  BatchFootprint fresh;
  Add(lead.input, fresh);
  other.input.k = 7;
  EXPECT_FALSE(CanJoin(lead.input, other.input, fresh, kLimits, 10));
}

}  // namespace
}  // namespace topk::server::test
