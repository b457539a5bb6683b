// The measured route table's override (route_table.h): for the planner's own
// choices (no route, variant or grid forced), the route the sweep measured
// fastest in the bucket's cell replaces the rules' where it fits the bucket
// and device; Plan::why says which decided and by what measurement.
#include "absl/strings/str_format.h"
#include "route_choice.h"
#include "route_policies.h"
#include "route_table.h"
#include "topk/cuda_selector.h"

namespace topk::planner {
namespace {

// The table applies only to the planner's own choices: a configuration that
// forces a route, a variant or a grid (A/B measurements) keeps the rules.
bool TableApplies(const CudaSelectorConfig& config) {
  return config.use_route_table && PlannerChoosesFreely(config) && config.resident_route <= 0 &&
         config.resident_cluster_size == 0 && config.resident_threads == 0;
}

// Each cell's choice as a route and its policy; kRules has none.
struct TableRoute {
  TableChoice cell;
  RouteChoice choice;
};
constexpr TableRoute kTableRoutes[] = {
    {TableChoice::kPersistent512, {.route = Route::kPersistentSampled}},
    {TableChoice::kPersistent256, {.route = Route::kPersistentSampled, .small_blocks = true}},
    {TableChoice::kShortRow, {.route = Route::kShortRowExact}},
    {TableChoice::kKvSplit2, {.route = Route::kKvSplitSampled, .split = 2}},
    {TableChoice::kKvSplit4, {.route = Route::kKvSplitSampled, .split = 4}},
    {TableChoice::kKvSplit8, {.route = Route::kKvSplitSampled, .split = 8}},
    {TableChoice::kCluster8x1, {.route = Route::kClusterSampled, .split = 8, .ctas_per_sm = 1}},
    {TableChoice::kCluster8x2, {.route = Route::kClusterSampled, .split = 8, .ctas_per_sm = 2}},
    {TableChoice::kCluster16x1, {.route = Route::kClusterSampled, .split = 16, .ctas_per_sm = 1}},
};

// Whether the measured route can serve this bucket on this device: the
// sampled kernels' K and width limits, the 256-thread kernel's K <= 2048,
// resident clusters, an int32 grid. Where not, the rules decide.
bool FitsBucket(const RouteChoice& choice, const PlanInputs& in) {
  const ProblemShape& shape = in.shape;
  switch (choice.route) {
    case Route::kShortRowExact:
      return shape.k <= kShortRow.max_k;
    case Route::kPersistentSampled:
      if (choice.small_blocks &&
          (in.device.small_block_ctas_per_sm <= 0 || shape.k > kPersistent256.output)) {
        return false;
      }
      return shape.k <= kCudaMaxFastK && shape.max_width >= kMinSampledLength;
    case Route::kKvSplitSampled:
      return shape.k <= kCudaMaxFastK && shape.max_width >= kKvSplit.min_width &&
             shape.max_rows * choice.split <= (int64_t{1} << 30);
    case Route::kClusterSampled:
      return shape.k <= kCudaMaxFastK && shape.max_width >= kClusterTable.min_width &&
             ClustersOf(in.device, choice.split, choice.ctas_per_sm) > 0;
    default:
      return false;
  }
}

const RouteChoice* RouteOfCell(TableChoice cell) {
  for (const TableRoute& t : kTableRoutes) {
    if (t.cell == cell) return &t.choice;
  }
  return nullptr;  // kRules
}

}  // namespace

TableVerdict ConsultRouteTable(const PlanInputs& in) {
  TableVerdict verdict;
  if (!TableApplies(in.config)) {
    verdict.why = "rules: the configuration forces the route";
    return verdict;
  }
  // The table was measured before the resident route existed: in its region
  // the rules' choice stands (its own measurements, bench/NOTES.md).
  if (CudaResidentClusterSize(in.shape, in.device, in.config) > 0) {
    verdict.why = "rules: the resident decode route's measured region";
    return verdict;
  }
  const RouteTableEntry* entry =
      FindRouteEntry(RouteTable(), in.shape.k, in.shape.max_rows, in.shape.max_width);
  if (entry == nullptr) {
    verdict.why = "rules: outside the measured table";
    return verdict;
  }
  const RouteChoice* measured = RouteOfCell(entry->choice);
  if (measured != nullptr && FitsBucket(*measured, in)) {
    verdict.overrides = true;
    verdict.choice = *measured;
    verdict.why = absl::StrFormat(
        "table: K<=%d N_cap<=%d M_cap<=%d measured %s %.1f us vs the rules' %.1f us", entry->max_k,
        entry->max_width, entry->max_rows, TableChoiceName(entry->choice), entry->best_us,
        entry->rules_us);
    return verdict;
  }
  verdict.why = absl::StrFormat(
      "rules: measured fastest in the table's K<=%d N_cap<=%d M_cap<=%d cell (%.1f us)",
      entry->max_k, entry->max_width, entry->max_rows, entry->rules_us);
  return verdict;
}

}  // namespace topk::planner
