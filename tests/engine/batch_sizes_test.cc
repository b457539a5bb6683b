// BatchSizes, the requests-per-backend-call histogram the metrics report: a
// call lands in the first bucket whose bound it does not exceed (the bounds
// are inclusive), past the last bound in the overflow bucket, and samples
// add up across devices.
#include "server/engine/batch_sizes.h"

#include "gtest/gtest.h"

namespace topk::server::test {
namespace {

TEST(BatchSizes, EachCallLandsInTheFirstBucketItFits) {
  BatchSizes sizes;
  for (int64_t requests : {1, 2, 3, 4, 5, 1024, 1025}) sizes.Record(requests);
  const BatchSizeCounts counts = sizes.Sample();
  EXPECT_EQ(counts.buckets[0], 1);   // 1
  EXPECT_EQ(counts.buckets[1], 1);   // 2
  EXPECT_EQ(counts.buckets[2], 2);   // 3, 4
  EXPECT_EQ(counts.buckets[3], 1);   // 5
  EXPECT_EQ(counts.buckets[10], 1);  // 1024
  EXPECT_EQ(counts.buckets[11], 1);  // 1025: past the last bound
  EXPECT_EQ(counts.calls, 7);
  EXPECT_EQ(counts.requests, 1 + 2 + 3 + 4 + 5 + 1024 + 1025);
  EXPECT_EQ(counts.max, 1025);
}

TEST(BatchSizes, SamplesAddUpAcrossDevices) {
  BatchSizes a, b;
  a.Record(3);
  b.Record(3);
  b.Record(40);
  BatchSizeCounts total = a.Sample();
  total += b.Sample();
  EXPECT_EQ(total.calls, 3);
  EXPECT_EQ(total.requests, 46);
  EXPECT_EQ(total.max, 40);
  EXPECT_EQ(total.buckets[2], 2);
  EXPECT_EQ(total.buckets[6], 1);  // 40: within 64
}

}  // namespace
}  // namespace topk::server::test
