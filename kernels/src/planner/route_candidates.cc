// The rules as an ordered list of route candidates: each names the route, the
// predicate that admits it and the policy it brings; the first that applies
// wins. The order is the rules' precedence: the short-row route where it
// measured faster, the exact routes where sampling cannot serve (large K,
// short rows, sampling off), then the sampled family from the most specific
// (clusters for few long rows, a forced or fitting KV split) to the
// persistent route, which takes the rest.
#include "route_choice.h"
#include "route_policies.h"
#include "topk/cuda_selector.h"

namespace topk::planner {
namespace {

struct RouteCandidate {
  const char* name;  // the reader's label; Plan::why does not name candidates
  bool (*applies)(const PlanInputs& in);
  RouteChoice (*choose)(const PlanInputs& in);
};

// The 512-thread kernel's residency (also the KV-split kernel's).
int64_t ResidentCtas(const CudaDeviceInfo& device) {
  return int64_t{device.sm_count} * device.persistent_ctas_per_sm;
}

// The most segments per row whose CTAs all stay resident; 0 when none does.
int32_t FittingSplit(const PlanInputs& in) {
  for (int32_t split : kKvSplit.splits) {
    if (in.shape.max_rows * split <= ResidentCtas(in.device)) return split;
  }
  return 0;
}

// --- Predicates ---------------------------------------------------------

// Short rows, where one small CTA per row measured faster than the
// persistent routes (short_row_max_width forces the reach).
bool ShortRowsReach(const PlanInputs& in) {
  const int64_t reach = in.config.short_row_max_width > 0
                            ? in.config.short_row_max_width
                            : CudaShortRowReach(in.shape.k, in.shape.max_rows);
  return in.config.enable_sampling && in.config.enable_short_rows &&
         in.shape.k <= kShortRow.max_k && in.shape.max_width <= reach;
}
// K past the fast path: global output staging and sort scratch.
bool KAboveFastPath(const PlanInputs& in) { return in.shape.k > kCudaMaxFastK; }
// Sampling off, or rows too short for the sample to pay (the measured
// crossover, or min_sampled_length).
bool SamplingDoesNotPay(const PlanInputs& in) {
  const int64_t min_sampled =
      in.config.min_sampled_length > 0 ? in.config.min_sampled_length : kMinSampledLength;
  return !in.config.enable_sampling || in.shape.max_width < min_sampled;
}
// Few long rows on thread-block clusters: each row split over one cluster
// whose ranks all-reduce through distributed shared memory.
bool ClusterFits(const PlanInputs& in) {
  return CudaChooseCluster(in.shape, in.device, in.config).size > 0;
}
// kv_split_force (A/B): every row split, the grid beyond the resident CTAs.
bool KvSplitForced(const PlanInputs& in) { return CudaForcedSplit(in.shape, in.config) > 0; }
// Few long rows: split each over 2/4/8 CTAs so the certification pass spans
// the device (the persistent grid would leave most SMs idle).
bool KvSplitFits(const PlanInputs& in) {
  return in.config.enable_kv_split && in.shape.max_width >= kKvSplit.min_width &&
         FittingSplit(in) > 0;
}
bool Always(const PlanInputs&) { return true; }

// --- The policies they bring --------------------------------------------

RouteChoice ShortRow(const PlanInputs&) { return {.route = Route::kShortRowExact}; }
RouteChoice GeneralExact(const PlanInputs&) { return {.route = Route::kGeneralExact}; }
// The 4-CTAs/SM variant only where forced (ctas_per_sm_target = 4).
RouteChoice RowLocalExact(const PlanInputs& in) {
  return {.route = Route::kRowLocalExact,
          .small_blocks = CudaUseSmallBlocks(in.shape, in.device, in.config) &&
                          in.config.ctas_per_sm_target == 4};
}
RouteChoice Cluster(const PlanInputs& in) {
  const CudaClusterChoice c = CudaChooseCluster(in.shape, in.device, in.config);
  return {.route = Route::kClusterSampled, .split = c.size, .ctas_per_sm = c.ctas_per_sm};
}
RouteChoice ForcedKvSplit(const PlanInputs& in) {
  return {.route = Route::kKvSplitSampled, .split = CudaForcedSplit(in.shape, in.config)};
}
RouteChoice FittingKvSplit(const PlanInputs& in) {
  return {.route = Route::kKvSplitSampled, .split = FittingSplit(in)};
}
// The 4-CTAs/SM variant forced, or the planner's per-shape choice.
RouteChoice PersistentSampled(const PlanInputs& in) {
  return {.route = Route::kPersistentSampled,
          .small_blocks = CudaUseSmallBlocks(in.shape, in.device, in.config)};
}

constexpr RouteCandidate kRuleCandidates[] = {
    {"short-row", ShortRowsReach, ShortRow},
    {"general-exact", KAboveFastPath, GeneralExact},
    {"row-local-exact", SamplingDoesNotPay, RowLocalExact},
    {"cluster", ClusterFits, Cluster},
    {"kv-split forced", KvSplitForced, ForcedKvSplit},
    {"kv-split", KvSplitFits, FittingKvSplit},
    {"persistent-sampled", Always, PersistentSampled},
};

}  // namespace

RouteChoice ChooseRouteByRules(const PlanInputs& in) {
  for (const RouteCandidate& candidate : kRuleCandidates) {
    if (candidate.applies(in)) return candidate.choose(in);
  }
  return PersistentSampled(in);  // not reached: the last candidate always applies
}

}  // namespace topk::planner
