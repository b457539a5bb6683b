// The rules as an ordered list of route candidates: each names its route and
// the policy it brings where it applies; the first that applies wins, and
// the persistent route takes the rest. The order is the rules' precedence: the resident decode
// route in its measured region (decode batches), the short-row route
// where it measured faster, the exact routes where sampling cannot serve (large K, short rows,
// sampling off), then the sampled family from the most specific (clusters for few long rows, a
// forced or fitting KV split) to the persistent route, which takes the rest.
#include <optional>

#include "route_choice.h"
#include "route_policies.h"
#include "topk/cuda_selector.h"

namespace topk::planner {
namespace {

// A candidate: the route it names when it applies to the bucket, with the
// policy it brings; nullopt when it does not (the next candidate is asked).
// Each computes what decides it once and keeps it in the choice.
using RouteCandidate = std::optional<RouteChoice> (*)(const PlanInputs& in);

// The 512-thread kernel's residency (also the KV-split kernel's).
int64_t ResidentCtas(const CudaDeviceInfo& device) {
  return int64_t{device.sm_count} * device.persistent_ctas_per_sm;
}

// Short rows, where one small CTA per row measured faster than the
// persistent routes (short_row_max_width forces the reach).
std::optional<RouteChoice> ShortRow(const PlanInputs& in) {
  const int64_t reach = in.config.short_row_max_width > 0
                            ? in.config.short_row_max_width
                            : CudaShortRowReach(in.shape.k, in.shape.max_rows);
  if (!in.config.enable_sampling || !in.config.enable_short_rows || in.shape.k > kShortRow.max_k ||
      in.shape.max_width > reach) {
    return std::nullopt;
  }
  return RouteChoice{.route = Route::kShortRowExact};
}

// K past the fast path: global output staging and sort scratch.
std::optional<RouteChoice> GeneralExact(const PlanInputs& in) {
  if (in.shape.k <= kCudaMaxFastK) return std::nullopt;
  return RouteChoice{.route = Route::kGeneralExact};
}

// Sampling off, or rows too short for the sample to pay (the measured
// crossover, or min_sampled_length). The 4-CTAs/SM variant only where
// forced (ctas_per_sm_target = 4).
std::optional<RouteChoice> RowLocalExact(const PlanInputs& in) {
  const int64_t min_sampled =
      in.config.min_sampled_length > 0 ? in.config.min_sampled_length : kMinSampledLength;
  if (in.config.enable_sampling && in.shape.max_width >= min_sampled) return std::nullopt;
  return RouteChoice{.route = Route::kRowLocalExact,
                     .small_blocks = CudaUseSmallBlocks(in.shape, in.device, in.config) &&
                                     in.config.ctas_per_sm_target == 4};
}

// Decode batches: one cluster per row, the row kept in its ranks' shared
// memory (the route's measured region, or resident_route = 1).
std::optional<RouteChoice> ResidentDecode(const PlanInputs& in) {
  const int size = CudaResidentClusterSize(in.shape, in.device, in.config);
  if (size <= 0) return std::nullopt;
  return RouteChoice{.route = Route::kResidentDecode, .split = size};
}

// Few long rows on thread-block clusters: each row split over one cluster
// whose ranks all-reduce through distributed shared memory.
std::optional<RouteChoice> Cluster(const PlanInputs& in) {
  const CudaClusterChoice c = CudaChooseCluster(in.shape, in.device, in.config);
  if (c.size <= 0) return std::nullopt;
  return RouteChoice{
      .route = Route::kClusterSampled, .split = c.size, .ctas_per_sm = c.ctas_per_sm};
}

// kv_split_force (A/B): every row split, the grid beyond the resident CTAs.
std::optional<RouteChoice> ForcedKvSplit(const PlanInputs& in) {
  const int32_t split = CudaForcedSplit(in.shape, in.config);
  if (split <= 0) return std::nullopt;
  return RouteChoice{.route = Route::kKvSplitSampled, .split = split};
}

// Few long rows: split each over 2/4/8 CTAs so the certification pass spans
// the device (the persistent grid would leave most SMs idle); the most
// segments per row whose CTAs all stay resident.
std::optional<RouteChoice> FittingKvSplit(const PlanInputs& in) {
  if (!in.config.enable_kv_split || in.shape.max_width < kKvSplit.min_width) return std::nullopt;
  for (int32_t split : kKvSplit.splits) {
    if (in.shape.max_rows * split <= ResidentCtas(in.device)) {
      return RouteChoice{.route = Route::kKvSplitSampled, .split = split};
    }
  }
  return std::nullopt;
}

// The rest: the 4-CTAs/SM variant forced, or the planner's per-shape choice.
RouteChoice PersistentSampled(const PlanInputs& in) {
  return {.route = Route::kPersistentSampled,
          .small_blocks = CudaUseSmallBlocks(in.shape, in.device, in.config)};
}

constexpr RouteCandidate kRuleCandidates[] = {
    ResidentDecode, ShortRow, GeneralExact, RowLocalExact, Cluster, ForcedKvSplit, FittingKvSplit,
};

}  // namespace

RouteChoice ChooseRouteByRules(const PlanInputs& in) {
  for (RouteCandidate candidate : kRuleCandidates) {
    if (std::optional<RouteChoice> choice = candidate(in)) return *choice;
  }
  return PersistentSampled(in);
}

}  // namespace topk::planner
