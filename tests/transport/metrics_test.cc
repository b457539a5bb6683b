// The metrics an operator scrapes beyond the request counters: build info,
// per-device series (info, usable, queue, in flight; device memory and CUDA
// graph captures on a GPU), and plan-cache hits and misses.
#include <sstream>
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

// The autoscaling signal: 0 on an idle server, above 0 once the workers
// have served, with the busy seconds behind it.
TEST(Metrics, SaturationRisesUnderLoad) {
  TestServer t = StartServer();
  const std::string device = TestBackend() == "cpu" ? "cpu" : "0";
  ExpectLine(Scrape(t), absl::StrCat("topk_device_saturation{device=\"", device, "\"} 0\n"));
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 16, 1 << 14);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(t.client->Select(64, rows.view()).ok());
  double saturation = -1, busy_seconds = -1;
  std::istringstream lines(Scrape(t));
  for (std::string line; std::getline(lines, line);) {
    const std::string where = absl::StrCat("{device=\"", device, "\"} ");
    if (absl::StartsWith(line, "topk_device_saturation" + where)) {
      saturation = std::stod(line.substr(line.rfind(' ') + 1));
    }
    if (absl::StartsWith(line, "topk_device_busy_seconds_total" + where)) {
      busy_seconds = std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  EXPECT_GT(saturation, 0);
  EXPECT_LE(saturation, 1);
  EXPECT_GT(busy_seconds, 0);
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
