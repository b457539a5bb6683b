// Memory is allocated at start: 10,000 small requests must not grow the
// resident set beyond noise (allocator caches, gRPC's arenas).
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "support/server_process.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

TEST(ServerMemory, ResidentSetDoesNotGrowOverTenThousandRequests) {
  TestServer t = StartServer();
  const tools::PackedRows rows = Rows(testing::Distribution::kIndexer, 2, 300);
  const v1::SelectRequest request = client::Client::MakeRequest(16, rows.view(), {});
  auto run = [&](int n) {
    for (int i = 0; i < n; ++i) {
      absl::StatusOr<client::SelectResult> result = t.client->Select(request);
      ASSERT_TRUE(result.ok()) << result.status();
      if (i % 1000 == 0) {
        ASSERT_TRUE(tools::Verify(rows, 16, {}, *result).ok());
      }
    }
  };
  run(1000);  // warm-up: plan cache, gRPC pools, allocator arenas
  const int64_t before = ResidentKb();
  ASSERT_GT(before, 0);
  run(10000);
  const int64_t after = ResidentKb();
  RecordProperty("rss_before_kb", std::to_string(before));
  RecordProperty("rss_after_kb", std::to_string(after));
  EXPECT_LT(after - before, 8 * 1024) << "RSS grew from " << before << " kB to " << after << " kB";
}

}  // namespace
}  // namespace topk::server::test
