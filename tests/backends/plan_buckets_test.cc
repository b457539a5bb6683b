// Plan buckets (server/backends/plan_buckets.h): how a request's shape maps
// to the key its plan (and, on a GPU, its graph) is cached under, and the
// workspace the backends allocate once to cover every bucket.
#include "server/backends/plan_buckets.h"

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"
#include "topk/cpu_selector.h"

namespace topk::server::test {
namespace {

TEST(PlanBuckets, RoundRowsAndWidthUpToPowersOfTwoWithinTheLimits) {
  const RequestLimits limits{.max_k = 2048, .max_rows = 100, .max_width = 100000};
  const PlanKey key = BucketOf(7, 33, 70000, {.sorted = true}, limits);
  EXPECT_EQ(key.k, 7);
  EXPECT_EQ(key.max_rows, 64);
  EXPECT_EQ(key.max_width, 100000);  // 131072 capped at max_width
  EXPECT_TRUE(key.sorted);
  EXPECT_EQ(BucketOf(7, 1, 0, {}, limits).max_width, 1);  // all-empty rows still plan
  EXPECT_EQ(RoundUpPow2(65, 1 << 20), 128);
}

TEST(PlanBuckets, RoundUpPow2AtItsEdges) {
  EXPECT_EQ(RoundUpPow2(0, 64), 1);
  EXPECT_EQ(RoundUpPow2(1, 64), 1);
  EXPECT_EQ(RoundUpPow2(64, 64), 64);
  EXPECT_EQ(RoundUpPow2(65, 64), 64);  // capped
  EXPECT_EQ(RoundUpPow2(int64_t{1} << 40, int64_t{1} << 50), int64_t{1} << 40);
}

// K and the options are exact in the key (no rounding: a plan for K = 8
// must not answer K = 7), and so is the score type: one shape in three
// types is three plans.
TEST(PlanBuckets, KOptionsAndScoreTypeAreExact) {
  const RequestLimits limits{.max_k = 64, .max_rows = 64, .max_width = 4096};
  const PlanKey fp32 = BucketOf(7, 3, 100, {}, limits);
  EXPECT_EQ(fp32.k, 7);
  EXPECT_EQ(fp32.dtype, ScoreType::kFloat32);  // the default
  EXPECT_NE(fp32, BucketOf(8, 3, 100, {}, limits));
  EXPECT_NE(fp32, BucketOf(7, 3, 100, {.sorted = true}, limits));
  EXPECT_NE(fp32, BucketOf(7, 3, 100, {.deterministic = true}, limits));
  EXPECT_EQ(fp32, BucketOf(7, 4, 128, {}, limits));  // the same bucket
  absl::flat_hash_set<PlanKey> keys;
  for (ScoreType dtype : kAllScoreTypes) {
    const PlanKey key = BucketOf(7, 3, 100, {}, limits, dtype);
    EXPECT_EQ(key.dtype, dtype);
    keys.insert(key);
  }
  EXPECT_EQ(keys.size(), 3u);  // distinct under the hash map's hash and ==
}

TEST(PlanBuckets, KeyOfAPlanIsTheBucketItWasMadeFor) {
  const RequestLimits limits{.max_k = 64, .max_rows = 64, .max_width = 4096};
  const PlanKey key = BucketOf(5, 9, 300, {.sorted = true}, limits, ScoreType::kBFloat16);
  const Plan plan{.shape = {.k = key.k,
                            .max_rows = key.max_rows,
                            .max_width = key.max_width,
                            .layout = Layout::kPacked,
                            .dtype = key.dtype},
                  .options = {.sorted = key.sorted, .deterministic = key.deterministic}};
  EXPECT_EQ(KeyOf(plan), key);
}

// The workspace allocated at start covers the plan of every bucket a
// request can fall in (the worker refuses a plan that needs more).
TEST(PlanBuckets, MaxWorkspaceCoversEveryBucketsPlan) {
  const RequestLimits limits{.max_k = 48, .max_rows = 6, .max_width = 3000};
  CpuSelector selector(CpuSelectorConfig{.threads = 2});
  absl::StatusOr<size_t> most = MaxWorkspaceBytes(selector, limits);
  ASSERT_TRUE(most.ok()) << most.status();
  for (int32_t k : {1, 7, 33, 48}) {
    for (int64_t rows : {1, 5, 6}) {
      for (int64_t width : {1, 100, 2049, 3000}) {
        for (ScoreType dtype : kAllScoreTypes) {
          const PlanKey key = BucketOf(k, rows, width, {.sorted = true}, limits, dtype);
          absl::StatusOr<Plan> plan = selector.MakePlan({.k = key.k,
                                                         .max_rows = key.max_rows,
                                                         .max_width = key.max_width,
                                                         .layout = Layout::kPacked,
                                                         .dtype = dtype},
                                                        {.sorted = true});
          if (!plan.ok()) continue;  // a bucket the selector cannot plan costs nothing
          EXPECT_LE(plan->workspace_bytes, *most) << "k=" << k << " rows=" << rows;
        }
      }
    }
  }
}

}  // namespace
}  // namespace topk::server::test
