// The planner's decision in three steps, each its own file:
//   1. route_candidates.cc: the rules, an ordered list of route candidates;
//      the first that applies names the route (ChooseRouteByRules).
//   2. table_override.cc: the measured route table (route_table.h) replaces
//      that choice where it measured another route faster and the route fits
//      the bucket (ConsultRouteTable); it also writes Plan::why.
//   3. route_parameters.cc: one small function per route turns the choice
//      into the plan's kernel shape and grid (DeriveRouteParameters).
// cuda_planner.cc validates the request and runs the three in order. Adding
// a route: its Route (selector.h), its policy (route_policies.h), a
// candidate, a derivation, its workspace parts (plan_workspace.cc) and, if
// the route sweep measures it, a TableChoice.
#pragma once

#include <cstdint>
#include <string>

#include "topk/cuda_selector.h"
#include "topk/selector.h"

namespace topk::planner {

// What every step reads: the bucket and the facts it is planned for.
struct PlanInputs {
  const ProblemShape& shape;
  const CudaDeviceInfo& device;
  const CudaSelectorConfig& config;
};

// A route and the policy it brings, before the grid is derived.
struct RouteChoice {
  Route route = Route::kPersistentSampled;
  // The persistent kernels' 256-thread, 4-CTAs-per-SM variant
  // (kPersistent256) instead of kPersistent512.
  bool small_blocks = false;
  int32_t split = 1;    // KV-split: segments (CTAs) per row; cluster: its size
  int ctas_per_sm = 0;  // cluster: the kernel variant (1 or 2 CTAs per SM)
};

// Whether the configuration leaves the route, kernel variant, stride and grid
// to the planner (no A/B setting forces one): where the measured table and
// the resident route's region apply.
bool PlannerChoosesFreely(const CudaSelectorConfig& config);

// Whether the bucket lies in the resident decode route's measured region
// (route_policies.h, kResidentRegion).
bool InResidentRegion(const ProblemShape& shape);

// Resident clusters of the cluster route of `size` CTAs, ctas_per_sm per SM
// (0: the device has none of that shape).
int ClustersOf(const CudaDeviceInfo& device, int size, int ctas_per_sm);

// Step 1: the rules' route; some candidate always applies.
RouteChoice ChooseRouteByRules(const PlanInputs& in);

// Step 2: the table's route where it overrides the rules, and why.
struct TableVerdict {
  bool overrides = false;
  RouteChoice choice;  // meaningful when overrides
  std::string why;     // Plan::why, for the table's choice or the rules'
};
TableVerdict ConsultRouteTable(const PlanInputs& in);

// Step 3: the route's kernel shape (block, split, CTAs per SM), sample
// stride and grid, written into `plan` (the workspace is sized after).
void DeriveRouteParameters(const RouteChoice& choice, const PlanInputs& in, Plan* plan);

}  // namespace topk::planner
