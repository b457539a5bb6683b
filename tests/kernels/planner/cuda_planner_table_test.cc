// The planner's measured route table (kernels/src/planner/route_table.h): the
// lookup's bands on a table of our own, and every cell of the real table
// planned on a fake H200 with clusters.
#include <gtest/gtest.h>

#include <array>
#include <string>

#include "cuda_planner_fake_device.h"
#include "route_table.h"
#include "topk/cuda_selector.h"

namespace topk {
namespace {

using planner::FindRouteEntry;
using planner::RouteTableEntry;
using planner::TableChoice;

constexpr std::array<RouteTableEntry, 6> kTable = {{
    {512, 65536, 1, TableChoice::kKvSplit8, 1, 2},
    {512, 65536, 64, TableChoice::kCluster8x2, 1, 2},
    {512, 262144, 64, TableChoice::kPersistent512, 1, 2},
    {512, 262144, 2048, TableChoice::kRules, 1, 1},
    {2048, 131072, 8, TableChoice::kShortRow, 1, 2},
    {2048, 131072, 512, TableChoice::kPersistent256, 1, 2},
}};

RouteTableEntry Expect(int32_t k, int64_t m, int64_t n) {
  const RouteTableEntry* e = FindRouteEntry(kTable, k, m, n);
  return e == nullptr ? RouteTableEntry{0, 0, 0, TableChoice::kRules, 0, 0} : *e;
}

TEST(RouteTableTest, BandsOfKWidthAndRows) {
  // K up to 512 takes the 512 band, above it up to 4096 the 2048 band.
  EXPECT_EQ(Expect(64, 1, 65536).choice, TableChoice::kKvSplit8);
  EXPECT_EQ(Expect(513, 8, 131072).choice, TableChoice::kShortRow);
  EXPECT_EQ(Expect(4096, 8, 131072).choice, TableChoice::kShortRow);
  EXPECT_EQ(FindRouteEntry(kTable, 4097, 8, 131072), nullptr);
  // Rows: from above the next smaller corner up to this one.
  EXPECT_EQ(Expect(512, 2, 65536).choice, TableChoice::kCluster8x2);
  EXPECT_EQ(Expect(512, 64, 65536).choice, TableChoice::kCluster8x2);
  EXPECT_EQ(FindRouteEntry(kTable, 512, 65, 65536), nullptr);  // no wider row band at 64K
  EXPECT_EQ(Expect(512, 65, 262144).choice, TableChoice::kRules);
  EXPECT_EQ(FindRouteEntry(kTable, 512, 2049, 262144), nullptr);
  // Widths: each corner covers its octave only.
  EXPECT_EQ(Expect(512, 1, 32769).choice, TableChoice::kKvSplit8);
  EXPECT_EQ(FindRouteEntry(kTable, 512, 1, 32768), nullptr);
  EXPECT_EQ(FindRouteEntry(kTable, 512, 1, 131072), nullptr);  // 262144's octave starts above
  EXPECT_EQ(Expect(512, 64, 131073).choice, TableChoice::kPersistent512);
  EXPECT_EQ(FindRouteEntry(kTable, 512, 1, 262145), nullptr);
}

// Every cell of the real table: a choice that fits the bucket plans the
// route and kernel shape it names and says so; kRules cells plan as the
// rules do.
TEST(RouteTableTest, EveryCellPlansItsChoice) {
  const CudaDeviceInfo h200 = testing::FakeH200WithClusters();
  ASSERT_FALSE(planner::RouteTable().empty());
  for (const RouteTableEntry& e : planner::RouteTable()) {
    const ProblemShape shape{e.max_k, e.max_rows, e.max_width, Layout::kPitched};
    auto table = PlanCudaSelection(shape, {}, h200, {});
    auto rules = PlanCudaSelection(shape, {}, h200, testing::Rules());
    ASSERT_TRUE(table.ok() && rules.ok()) << table.status() << rules.status();
    const std::string where = table->Explain();
    if (e.choice == TableChoice::kRules) {
      EXPECT_EQ(table->route, rules->route) << where;
      EXPECT_EQ(table->grid, rules->grid) << where;
      EXPECT_EQ(table->why.rfind("rules: measured fastest", 0), 0u) << where;
      continue;
    }
    EXPECT_EQ(table->why.rfind("table:", 0), 0u) << where;
    EXPECT_NE(table->why.find(planner::TableChoiceName(e.choice)), std::string::npos) << where;
    switch (e.choice) {
      case TableChoice::kPersistent512:
      case TableChoice::kPersistent256:
        EXPECT_EQ(table->route, Route::kPersistentSampled) << where;
        EXPECT_EQ(table->block, e.choice == TableChoice::kPersistent512 ? 512 : 256) << where;
        EXPECT_EQ(table->grid, std::min<int64_t>(e.max_rows, table->block == 512 ? 264 : 528));
        break;
      case TableChoice::kShortRow:
        EXPECT_EQ(table->route, Route::kShortRowExact) << where;
        EXPECT_EQ(table->grid, e.max_rows) << where;
        break;
      case TableChoice::kKvSplit2:
      case TableChoice::kKvSplit4:
      case TableChoice::kKvSplit8:
        EXPECT_EQ(table->route, Route::kKvSplitSampled) << where;
        EXPECT_EQ(table->grid, e.max_rows * table->split) << where;
        break;
      default:
        EXPECT_EQ(table->route, Route::kClusterSampled) << where;
        EXPECT_EQ(table->split, e.choice == TableChoice::kCluster16x1 ? 16 : 8) << where;
        EXPECT_EQ(table->ctas_per_sm, e.choice == TableChoice::kCluster8x2 ? 2 : 1) << where;
        break;
    }
    EXPECT_GT(table->workspace_bytes, 0u) << where;
  }
}

// A configuration that forces anything keeps the rules; a device without
// clusters turns a cluster cell back to the rules.
TEST(RouteTableTest, ForcedConfigurationsAndMissingFeaturesKeepTheRules) {
  CudaSelectorConfig forced;
  forced.ctas_per_sm_target = 2;
  for (const RouteTableEntry& e : planner::RouteTable()) {
    const ProblemShape shape{e.max_k, e.max_rows, e.max_width, Layout::kPitched};
    auto p = PlanCudaSelection(shape, {}, testing::FakeH200WithClusters(), forced);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->why.rfind("rules: the configuration forces the route", 0), 0u) << p->why;
    if (e.choice < TableChoice::kCluster8x1) continue;
    auto no_clusters = PlanCudaSelection(shape, {}, testing::FakeH200(), {});
    ASSERT_TRUE(no_clusters.ok());
    EXPECT_NE(no_clusters->route, Route::kClusterSampled);
    EXPECT_EQ(no_clusters->why.rfind("rules:", 0), 0u) << no_clusters->why;
  }
}

}  // namespace
}  // namespace topk
