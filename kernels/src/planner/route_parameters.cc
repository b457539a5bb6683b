// Step 3 of the planner: one function per route derives the plan's kernel
// shape and grid from the chosen route, its policy (route_policies.h) and
// the device. The rules and the table share these, so a route is launched
// the same way whichever chose it.
#include <algorithm>

#include "route_choice.h"
#include "route_policies.h"
#include "topk/algorithm_constants.h"
#include "topk/cuda_selector.h"

namespace topk::planner {
namespace {

// The short-row grid's cap: rows past it are strided over the grid.
constexpr int64_t kMaxShortRowGrid = int64_t{1} << 30;

// Whether the planner's own stride for a sampled bucket is the dense one
// (kDenseSampling).
bool UsesDenseSampling(const ProblemShape& bucket) {
  if (bucket.k > kDenseSampleMaxK) return false;
  for (const DenseSampleCell& cell : kDenseSampling) {
    if (bucket.max_width <= cell.max_width && bucket.max_rows <= cell.max_rows) return true;
  }
  return false;
}

// The sampled routes' stride: the configuration's A/B value, else the dense
// stride in its measured cells (route_policies.h), else the default.
int32_t SampledStride(const PlanInputs& in) {
  if (in.config.sample_stride != 0) return in.config.sample_stride;
  return UsesDenseSampling(in.shape) ? kDenseSampleStride : kSampleStride;
}

// One CTA per row (a smaller grid strides over the rows); frontiers in
// shared memory only, so the workspace is the header alone.
void ShortRowParameters(const PlanInputs& in, Plan* plan) {
  plan->sample_stride = 0;
  plan->block = kShortRow.threads;
  plan->split = 1;
  const int64_t rows = in.shape.max_rows;
  const int64_t grid = in.config.grid_override > 0 ? in.config.grid_override : rows;
  plan->grid = static_cast<int32_t>(std::min<int64_t>({grid, rows, kMaxShortRowGrid}));
}

// The persistent kernel (sampled, row-local exact, general exact): its
// variant's resident CTAs, or grid_override; no more CTAs than rows, since
// an idle CTA would only cost its slice.
void PersistentParameters(const RouteChoice& choice, const PlanInputs& in, Plan* plan) {
  const PersistentPolicy& policy = choice.small_blocks ? kPersistent256 : kPersistent512;
  const int ctas_per_sm =
      choice.small_blocks ? in.device.small_block_ctas_per_sm : in.device.persistent_ctas_per_sm;
  plan->sample_stride = choice.route == Route::kPersistentSampled ? SampledStride(in) : 0;
  plan->block = policy.threads;
  plan->split = 1;
  const int64_t resident = int64_t{in.device.sm_count} * ctas_per_sm;
  const int64_t grid = in.config.grid_override > 0 ? in.config.grid_override : resident;
  plan->grid = static_cast<int32_t>(std::min<int64_t>(grid, in.shape.max_rows));
}

// `split` segment CTAs of the 512-thread kernel per row.
void KvSplitParameters(const RouteChoice& choice, const PlanInputs& in, Plan* plan) {
  plan->sample_stride = SampledStride(in);
  plan->block = kPersistent512.threads;
  plan->split = choice.split;
  plan->grid = static_cast<int32_t>(in.shape.max_rows * choice.split);
}

// One cluster of `split` CTAs per row; the resident clusters take rows in
// turn.
void ClusterParameters(const RouteChoice& choice, const PlanInputs& in, Plan* plan) {
  const int clusters = ClustersOf(in.device, choice.split, choice.ctas_per_sm);
  plan->sample_stride = SampledStride(in);
  plan->block = kPersistent512.threads;
  plan->split = choice.split;
  plan->ctas_per_sm = choice.ctas_per_sm;
  plan->grid = static_cast<int32_t>(std::min<int64_t>(clusters, in.shape.max_rows) * choice.split);
}

// One cluster per row of the bucket: the rows need no co-residency (a
// cluster beyond the resident ones waits for a slot), no sample.
void ResidentParameters(const RouteChoice& choice, const PlanInputs& in, Plan* plan) {
  plan->split = choice.split;
  plan->block = CudaResidentThreads(in.shape, choice.split, in.config);
  plan->sample_stride = 0;
  plan->grid = static_cast<int32_t>(in.shape.max_rows * choice.split);
}

}  // namespace

void DeriveRouteParameters(const RouteChoice& choice, const PlanInputs& in, Plan* plan) {
  plan->route = choice.route;
  switch (choice.route) {
    case Route::kShortRowExact:
      ShortRowParameters(in, plan);
      return;
    case Route::kKvSplitSampled:
      KvSplitParameters(choice, in, plan);
      return;
    case Route::kClusterSampled:
      ClusterParameters(choice, in, plan);
      return;
    case Route::kResidentDecode:
      ResidentParameters(choice, in, plan);
      return;
    case Route::kPersistentSampled:
    case Route::kRowLocalExact:
    case Route::kGeneralExact:
    default:  // the CPU routes are not the CUDA planner's
      PersistentParameters(choice, in, plan);
      return;
  }
}

}  // namespace topk::planner
