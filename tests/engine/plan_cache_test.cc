// PlanCache, a worker's plans by bucket: one plan per key (every field of
// the key counts, the score type included, so FP32 and BF16 requests of one
// shape never share a plan), hits and misses counted, a bounded map, and a
// planning error passed on without caching it.
#include "server/engine/plan_cache.h"

#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace topk::server::test {
namespace {

// Plans nothing real: records the shapes asked for and can fail.
class CountingBackend final : public WorkerBackend {
 public:
  absl::StatusOr<Plan> MakePlan(const ProblemShape& shape,
                                const SelectOptions& options) const override {
    asked.push_back(shape);
    if (!fail.ok()) return fail;
    return Plan{.shape = shape, .options = options, .why = "counting"};
  }
  absl::Status Select(const Plan&, const SelectRows&, const SelectResults&) override {
    return absl::UnimplementedError("plans only");
  }
  mutable std::vector<ProblemShape> asked;
  absl::Status fail;
};

constexpr PlanKey kKey{.k = 8, .max_rows = 4, .max_width = 1024};

TEST(PlanCache, SecondLookupOfAKeyIsAHit) {
  CountingBackend backend;
  PlanCache cache(4);
  absl::StatusOr<const Plan*> first = cache.Get(kKey, backend);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<const Plan*> second = cache.Get(kKey, backend);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*first, *second);
  EXPECT_EQ(backend.asked.size(), 1u);
  EXPECT_EQ(cache.misses(), 1);
  EXPECT_EQ(cache.hits(), 1);
}

// The plan is made for the key's bucket, packed, in the key's type.
TEST(PlanCache, MakesThePlanForTheKeysShape) {
  CountingBackend backend;
  PlanCache cache(4);
  PlanKey key = kKey;
  key.sorted = true;
  key.dtype = ScoreType::kFloat16;
  absl::StatusOr<const Plan*> plan = cache.Get(key, backend);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(backend.asked.size(), 1u);
  const ProblemShape& shape = backend.asked[0];
  EXPECT_EQ(shape.k, 8);
  EXPECT_EQ(shape.max_rows, 4);
  EXPECT_EQ(shape.max_width, 1024);
  EXPECT_EQ(shape.layout, Layout::kPacked);
  EXPECT_EQ(shape.dtype, ScoreType::kFloat16);
  EXPECT_TRUE((*plan)->options.sorted);
  EXPECT_EQ(KeyOf(**plan), key);
}

TEST(PlanCache, EveryKeyFieldIncludingTheScoreTypeMakesItsOwnPlan) {
  CountingBackend backend;
  PlanCache cache(16);
  std::vector<PlanKey> keys(7, kKey);
  keys[1].k = 9;
  keys[2].max_rows = 8;
  keys[3].max_width = 2048;
  keys[4].sorted = true;
  keys[5].deterministic = true;
  keys[6].dtype = ScoreType::kBFloat16;
  for (const PlanKey& key : keys) ASSERT_TRUE(cache.Get(key, backend).ok());
  EXPECT_EQ(cache.misses(), 7);
  EXPECT_EQ(cache.hits(), 0);
  PlanKey fp16 = kKey;
  fp16.dtype = ScoreType::kFloat16;
  ASSERT_TRUE(cache.Get(fp16, backend).ok());
  EXPECT_EQ(cache.misses(), 8);  // BF16's plan does not serve FP16
  for (const PlanKey& key : keys) ASSERT_TRUE(cache.Get(key, backend).ok());
  EXPECT_EQ(cache.hits(), 7);
  EXPECT_EQ(backend.asked.size(), 8u);
}

// Beyond its capacity the cache still answers, with a fresh plan each time
// (adversarial K mixes must not grow it).
TEST(PlanCache, BeyondCapacityPlansAreMadeButNotKept) {
  CountingBackend backend;
  PlanCache cache(1);
  ASSERT_TRUE(cache.Get(kKey, backend).ok());
  PlanKey other = kKey;
  other.k = 16;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<const Plan*> plan = cache.Get(other, backend);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ((*plan)->shape.k, 16);
  }
  EXPECT_EQ(cache.misses(), 4);
  EXPECT_EQ(backend.asked.size(), 4u);
  ASSERT_TRUE(cache.Get(kKey, backend).ok());  // the kept one still hits
  EXPECT_EQ(cache.hits(), 1);
}

TEST(PlanCache, APlanningErrorIsReturnedAndNotCached) {
  CountingBackend backend;
  backend.fail = absl::InvalidArgumentError("k too large for this backend");
  PlanCache cache(4);
  EXPECT_EQ(cache.Get(kKey, backend).status(), backend.fail);
  backend.fail = absl::OkStatus();
  EXPECT_TRUE(cache.Get(kKey, backend).ok());  // asked again, not a cached failure
  EXPECT_EQ(backend.asked.size(), 2u);
  EXPECT_EQ(cache.misses(), 2);
}

}  // namespace
}  // namespace topk::server::test
