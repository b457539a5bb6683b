// The metrics an operator scrapes beyond the request counters: build info,
// per-device series (info, usable, queue, in flight; device memory and CUDA
// graph captures on a GPU), and plan-cache hits and misses.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

using testing::Distribution;

std::string Scrape(TestServer& t) {
  absl::StatusOr<v1::Stats> stats = t.client->GetStats(true);
  EXPECT_TRUE(stats.ok()) << stats.status();
  return stats.ok() ? stats->prometheus_text() : "";
}

void ExpectLine(const std::string& text, const std::string& line) {
  EXPECT_TRUE(absl::StrContains(text, line)) << "'" << line << "' missing from:\n" << text;
}

TEST(Metrics, BuildInfoAndPerDeviceSeries) {
  TestServer t = StartServer();
  const std::string text = Scrape(t);
  absl::StatusOr<v1::ServerInfo> info = t.client->GetServerInfo();
  ASSERT_TRUE(info.ok());
  ExpectLine(text, absl::StrCat("topk_build_info{backend=\"", info->backend(), "\",version=\"",
                                info->version(), "\"} 1"));
  const std::string device =
      TestBackend() == "cpu" ? "cpu" : std::to_string(info->devices(0).ordinal());
  ExpectLine(text, absl::StrCat("topk_device_usable{device=\"", device, "\"} 1"));
  ExpectLine(text, absl::StrCat("topk_device_queue_depth{device=\"", device, "\"} 0"));
  ExpectLine(text, absl::StrCat("topk_device_info{device=\"", device, "\",name=\""));
  if (TestBackend() == "cuda") {
    ExpectLine(text, absl::StrCat("topk_device_memory_used_bytes{device=\"", device, "\"}"));
  } else {
    EXPECT_FALSE(absl::StrContains(text, "topk_device_memory_used_bytes")) << text;
  }
}

TEST(Metrics, PlanCacheHitsAndMissesAndGraphCaptures) {
  ServerOptions options = SmallOptions();
  options.backends.workers = 1;  // every request meets the same cache
  TestServer t = StartServer(options);
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 4, 3000);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<client::SelectResult> result = t.client->Select(32, rows.view());
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_TRUE(tools::Verify(rows, 32, {}, *result).ok());
  }
  const std::string text = Scrape(t);
  absl::StatusOr<v1::ServerInfo> info = t.client->GetServerInfo();
  ASSERT_TRUE(info.ok());
  const std::string device =
      TestBackend() == "cpu" ? "cpu" : std::to_string(info->devices(0).ordinal());
  ExpectLine(text, absl::StrCat("topk_plan_cache_lookups_total{device=\"", device,
                                "\",result=\"miss\"} 1"));
  ExpectLine(text, absl::StrCat("topk_plan_cache_lookups_total{device=\"", device,
                                "\",result=\"hit\"} 2"));
  if (TestBackend() == "cuda") {
    ExpectLine(text, absl::StrCat("topk_cuda_graph_captures_total{device=\"", device,
                                  "\",result=\"ok\"} 1"));
    ExpectLine(text, absl::StrCat("topk_cuda_graph_replays_total{device=\"", device, "\"} 3"));
  }
}

}  // namespace
}  // namespace topk::server::test
