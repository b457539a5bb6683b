// The CUDA planner: a pure function of the shape bucket, the options, the
// device facts and the selector configuration. No CUDA calls, so it is
// unit-tested on machines without a GPU.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "kernel_args.h"
#include "plan_workspace.h"
#include "route_policies.h"
#include "route_table.h"
#include "topk/algorithm_constants.h"
#include "topk/cuda_selector.h"
#include "workspace_layout.h"

namespace topk {

namespace {
// The short-row grid's cap: rows past it are strided over the grid.
constexpr int64_t kMaxShortRowGrid = int64_t{1} << 30;

// Resident clusters of the cluster route of `size` CTAs, ctas_per_sm per SM.
int ClustersOf(const CudaDeviceInfo& device, int size, int ctas_per_sm) {
  if (ctas_per_sm == 2) {
    return size == 16 ? device.dense_clusters_of_16 : (size == 8 ? device.dense_clusters_of_8 : 0);
  }
  return size == 16 ? device.clusters_of_16 : (size == 8 ? device.clusters_of_8 : 0);
}
// Where the 256-thread kernel measured faster on FP32 rows.
bool SmallBlockFp32Region(const ProblemShape& shape) {
  return shape.max_width <= planner::kSmallBlockRegion.max_width ||
         (shape.max_width <= planner::kSmallBlockRegion.wide_max_width &&
          shape.max_rows >= planner::kSmallBlockRegion.wide_min_rows);
}

}  // namespace

// M_cap enters twice: 512 < K <= 2048 at 32K, where the route won at M = 4096
// and 8192 and lost at 1024 (a tie at 256); K <= 512 at 64K, where it won at
// M = 256 and 1024 (0.6913 and 0.9145 of persistent-sampled's time:
// bench/results/h200_short_rows.csv, rows 256,65536,512 and 1024,65536,512)
// and lost from 4096 on. Below 256 rows the 64K bucket keeps KV-split (or one
// persistent CTA per row), which that sweep did not measure against.
int64_t CudaShortRowReach(int32_t k, int64_t max_rows) {
  if (k <= planner::kShortRowReach.small_k) {
    return max_rows >= planner::kShortRowReach.wide_min_rows &&
                   max_rows <= planner::kShortRowReach.wide_max_rows
               ? planner::kShortRowReach.reach_small_k_wide
               : planner::kShortRowReach.reach_small_k;
  }
  if (k <= planner::kShortRowReach.measured_max_k) {
    return max_rows >= planner::kShortRowReach.many_rows ? planner::kShortRowReach.reach_many_rows
                                                         : planner::kShortRowReach.reach;
  }
  return 0;
}

bool CudaUseSmallBlocks(const ProblemShape& shape, const CudaDeviceInfo& device,
                        const CudaSelectorConfig& config) {
  // The small variant's shared output holds K <= kSmallMaxK and its slice has
  // no staging area for more.
  if (device.small_block_ctas_per_sm <= 0 || shape.k > planner::kPersistent256.output) return false;
  if (config.ctas_per_sm_target == 4) return true;
  if (config.ctas_per_sm_target != 0) return false;
  return SmallBlockFp32Region(shape) ||
         (shape.dtype != ScoreType::kFloat32 &&
          shape.max_rows >= planner::kSmallBlockRegion.min_rows_16 &&
          shape.max_width <= planner::kSmallBlockRegion.max_width_16);
}

bool CudaUseAdmitRing(const ProblemShape& shape, int32_t block, const CudaSelectorConfig& config) {
  if (config.admit_ring >= 0) return config.admit_ring > 0;
  const int64_t min_width = shape.dtype == ScoreType::kFloat32
                                ? planner::kAdmitRingRegion.min_width_32
                                : planner::kAdmitRingRegion.min_width_16;
  return block == planner::kPersistent256.threads && SmallBlockFp32Region(shape) &&
         shape.max_width >= min_width;
}

int32_t CudaForcedSplit(const ProblemShape& shape, const CudaSelectorConfig& config) {
  if (!config.enable_kv_split || config.kv_split_force <= 0 ||
      shape.max_width < planner::kKvSplit.min_width) {
    return 0;
  }
  // The grid is an int32 of CTAs.
  if (shape.max_rows * config.kv_split_force > (int64_t{1} << 30)) return 0;
  return config.kv_split_force;
}

CudaClusterChoice CudaChooseCluster(const ProblemShape& shape, const CudaDeviceInfo& device,
                                    const CudaSelectorConfig& config) {
  if (config.cluster_route < 0 || !config.enable_sampling || shape.k > kCudaMaxFastK ||
      shape.max_width < planner::kClusterTable.min_width) {
    return {};
  }
  // The measured table (route_policies.h, ClusterTable).
  const bool few = shape.max_rows <= planner::kClusterTable.max_rows &&
                   shape.max_width >= planner::kClusterTable.table_min_width;
  if (config.cluster_route == 0 && !few) return {};
  CudaClusterChoice c;
  c.size =
      config.cluster_size != 0
          ? config.cluster_size
          : (shape.max_rows == 1 && shape.max_width >= planner::kClusterTable.min_width_16 ? 16
                                                                                           : 8);
  c.ctas_per_sm = config.cluster_ctas_per_sm != 0 ? config.cluster_ctas_per_sm : 1;
  c.clusters = ClustersOf(device, c.size, c.ctas_per_sm);
  if (c.clusters <= 0) return {};
  return c;
}

namespace {

// The route setters shared by the rules and the table: each fills the plan's
// route, kernel shape and grid for its route; the workspace is FinishPlan's.
void SetShortRow(const ProblemShape& shape, const CudaSelectorConfig& config, Plan* plan) {
  // One CTA per row (a smaller grid strides over the rows); frontiers in
  // shared memory only, so the workspace is the header alone.
  plan->route = Route::kShortRowExact;
  plan->sample_stride = 0;
  plan->block = planner::kShortRow.threads;
  plan->split = 1;
  const int64_t grid = config.grid_override > 0 ? config.grid_override : shape.max_rows;
  plan->grid = static_cast<int32_t>(std::min<int64_t>({grid, shape.max_rows, kMaxShortRowGrid}));
}

void SetKvSplit(const ProblemShape& shape, int32_t split, Plan* plan) {
  plan->route = Route::kKvSplitSampled;
  plan->block = planner::kPersistent512.threads;
  plan->split = split;
  plan->grid = static_cast<int32_t>(shape.max_rows * split);
}

void SetCluster(const ProblemShape& shape, const CudaClusterChoice& cluster, Plan* plan) {
  plan->route = Route::kClusterSampled;
  plan->block = planner::kPersistent512.threads;
  plan->split = cluster.size;
  plan->ctas_per_sm = cluster.ctas_per_sm;
  plan->grid =
      static_cast<int32_t>(std::min<int64_t>(cluster.clusters, shape.max_rows) * cluster.size);
}

// No row is longer than N_cap, so none commits more than min(K, N_cap): the
// slices (candidate stores, output staging, sort scratch) are sized for that,
// not for K. The short-row route keeps its frontiers in shared memory
// (workspace_layout.h).
void FinishPlan(const CudaSelectorConfig& config, Plan* plan) {
  plan->workspace_bytes = static_cast<size_t>(CudaLayoutWorkspace(*plan, config).total_bytes);
}

// The table applies only to the planner's own choices: a configuration that
// forces a route, a variant or a grid (A/B measurements) keeps the rules.
bool TableApplies(const CudaSelectorConfig& config) {
  return config.use_route_table && config.enable_sampling && config.enable_short_rows &&
         config.enable_kv_split && config.short_row_max_width == 0 && config.cluster_route == 0 &&
         config.cluster_size == 0 && config.cluster_ctas_per_sm == 0 &&
         config.ctas_per_sm_target == 0 && config.kv_split_force == 0 &&
         config.grid_override == 0 && config.sample_stride == 0 && config.min_sampled_length == 0;
}

// The table's choice on this device and bucket; false where the choice is
// kRules or does not fit (the 256-thread kernel for K > 2048, no clusters,
// rows too narrow for the split), and the rules decide.
bool ApplyTableChoice(planner::TableChoice choice, const ProblemShape& shape,
                      const CudaDeviceInfo& device, const CudaSelectorConfig& config, Plan* plan) {
  using planner::TableChoice;
  const auto sampled = [&](int32_t block, int ctas_per_sm) {
    if (shape.k > kCudaMaxFastK || shape.max_width < planner::kMinSampledLength) return false;
    plan->route = Route::kPersistentSampled;
    plan->sample_stride = kSampleStride;
    plan->block = block;
    plan->grid = static_cast<int32_t>(
        std::min<int64_t>(int64_t{device.sm_count} * ctas_per_sm, shape.max_rows));
    return true;
  };
  const auto kv = [&](int32_t split) {
    if (shape.k > kCudaMaxFastK || shape.max_width < planner::kKvSplit.min_width ||
        shape.max_rows * split > (int64_t{1} << 30)) {
      return false;
    }
    plan->sample_stride = kSampleStride;
    SetKvSplit(shape, split, plan);
    return true;
  };
  const auto cluster = [&](int size, int ctas_per_sm) {
    if (shape.k > kCudaMaxFastK || shape.max_width < planner::kClusterTable.min_width) return false;
    const CudaClusterChoice c{size, ctas_per_sm, ClustersOf(device, size, ctas_per_sm)};
    if (c.clusters <= 0) return false;
    plan->sample_stride = kSampleStride;
    SetCluster(shape, c, plan);
    return true;
  };
  switch (choice) {
    case TableChoice::kRules:
      return false;
    case TableChoice::kPersistent512:
      return sampled(planner::kPersistent512.threads, device.persistent_ctas_per_sm);
    case TableChoice::kPersistent256:
      if (device.small_block_ctas_per_sm <= 0 || shape.k > planner::kPersistent256.output)
        return false;
      return sampled(planner::kPersistent256.threads, device.small_block_ctas_per_sm);
    case TableChoice::kShortRow:
      if (shape.k > planner::kShortRow.max_k) return false;
      SetShortRow(shape, config, plan);
      return true;
    case TableChoice::kKvSplit2:
      return kv(2);
    case TableChoice::kKvSplit4:
      return kv(4);
    case TableChoice::kKvSplit8:
      return kv(8);
    case TableChoice::kCluster8x1:
      return cluster(8, 1);
    case TableChoice::kCluster8x2:
      return cluster(8, 2);
    case TableChoice::kCluster16x1:
      return cluster(16, 1);
  }
  return false;
}

}  // namespace

absl::Status CheckCudaScoreType(ScoreType dtype) {
  for (ScoreType served : kAllScoreTypes) {
    if (dtype == served) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("dtype = %d: not fp32 (0), bf16 (1) or fp16 (2)", static_cast<int>(dtype)));
}

absl::StatusOr<Plan> PlanCudaSelection(const ProblemShape& shape, const SelectOptions& options,
                                       const CudaDeviceInfo& device,
                                       const CudaSelectorConfig& config) {
  if (absl::Status s = ValidateShape(shape); !s.ok()) return s;
  if (absl::Status s = CheckCudaScoreType(shape.dtype); !s.ok()) return s;
  if (shape.k > kCudaMaxK) {
    return absl::InvalidArgumentError(
        absl::StrFormat("k = %d: the CUDA backend serves k <= %d", shape.k, kCudaMaxK));
  }
  if (shape.max_width > (int64_t{1} << 31) - 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_width = %d: indices are int32", shape.max_width));
  }
  if (device.sm_count <= 0 || device.persistent_ctas_per_sm <= 0) {
    return absl::FailedPreconditionError("device info: no SMs or no resident CTAs");
  }
  if (config.sample_stride != 0 && config.sample_stride != 64 && config.sample_stride != 128 &&
      config.sample_stride != 256) {
    return absl::InvalidArgumentError(
        absl::StrFormat("sample_stride = %d: 64, 128 or 256", config.sample_stride));
  }
  if (config.sample_run != 1 && config.sample_run != 8) {
    return absl::InvalidArgumentError(
        absl::StrFormat("sample_run = %d: 1 or 8", config.sample_run));
  }
  if (config.cluster_size != 0 && config.cluster_size != 8 && config.cluster_size != 16) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cluster_size = %d: 0, 8 or 16", config.cluster_size));
  }
  if (config.cluster_ctas_per_sm < 0 || config.cluster_ctas_per_sm > 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cluster_ctas_per_sm = %d: 0, 1 or 2", config.cluster_ctas_per_sm));
  }
  if (config.short_row_variant != 0 && config.short_row_variant != kShortRowSharedRow) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "short_row_variant = %d: 0 or %d", config.short_row_variant, kShortRowSharedRow));
  }
  if (config.ctas_per_sm_target != 0 && config.ctas_per_sm_target != 2 &&
      config.ctas_per_sm_target != 4) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ctas_per_sm_target = %d: 0, 2 or 4", config.ctas_per_sm_target));
  }
  if (config.kv_split_force != 0 && config.kv_split_force != 2 && config.kv_split_force != 4 &&
      config.kv_split_force != 8) {
    return absl::InvalidArgumentError(
        absl::StrFormat("kv_split_force = %d: 0, 2, 4 or 8", config.kv_split_force));
  }
  Plan plan;
  plan.shape = shape;
  plan.options = options;
  plan.block = planner::kPersistent512.threads;
  plan.split = 1;
  if (TableApplies(config)) {
    const planner::RouteTableEntry* entry =
        planner::FindRouteEntry(planner::RouteTable(), shape.k, shape.max_rows, shape.max_width);
    if (entry != nullptr && ApplyTableChoice(entry->choice, shape, device, config, &plan)) {
      plan.why = absl::StrFormat(
          "table: K<=%d N_cap<=%d M_cap<=%d measured %s %.1f us vs the rules' %.1f us",
          entry->max_k, entry->max_width, entry->max_rows, planner::TableChoiceName(entry->choice),
          entry->best_us, entry->rules_us);
      FinishPlan(config, &plan);
      return plan;
    }
    plan.why = entry == nullptr
                   ? std::string("rules: outside the measured table")
                   : absl::StrFormat(
                         "rules: measured fastest in the table's K<=%d N_cap<=%d M_cap<=%d cell "
                         "(%.1f us)",
                         entry->max_k, entry->max_width, entry->max_rows, entry->rules_us);
  } else {
    plan.why = "rules: the configuration forces the route";
  }
  // The 512-thread kernel's residency (also the KV-split kernel's).
  const int64_t resident = int64_t{device.sm_count} * device.persistent_ctas_per_sm;
  const int64_t min_sampled =
      config.min_sampled_length > 0 ? config.min_sampled_length : planner::kMinSampledLength;
  const int64_t short_row_reach = config.short_row_max_width > 0
                                      ? config.short_row_max_width
                                      : CudaShortRowReach(shape.k, shape.max_rows);
  if (config.enable_sampling && config.enable_short_rows && shape.k <= planner::kShortRow.max_k &&
      shape.max_width <= short_row_reach) {
    SetShortRow(shape, config, &plan);
    FinishPlan(config, &plan);
    return plan;
  }
  if (shape.k > kCudaMaxFastK) {
    // General path: global output staging and sort scratch; exact route.
    plan.route = Route::kGeneralExact;
    plan.sample_stride = 0;
  } else if (!config.enable_sampling || shape.max_width < min_sampled) {
    plan.route = Route::kRowLocalExact;
    plan.sample_stride = 0;
  } else {
    plan.route = Route::kPersistentSampled;
    plan.sample_stride = config.sample_stride != 0 ? config.sample_stride : kSampleStride;
  }
  // The 4-CTAs/SM variant: forced (ctas_per_sm_target = 4) on both persistent
  // K <= 2048 routes, or the planner's per-shape choice (0) on the sampled one.
  const bool small = CudaUseSmallBlocks(shape, device, config) &&
                     (plan.route == Route::kPersistentSampled ||
                      (plan.route == Route::kRowLocalExact && config.ctas_per_sm_target == 4));
  if (small) plan.block = planner::kPersistent256.threads;
  const int64_t persistent_resident =
      small ? int64_t{device.sm_count} * device.small_block_ctas_per_sm : resident;
  const int64_t grid = config.grid_override > 0 ? config.grid_override : persistent_resident;
  // No more CTAs than rows: an idle CTA would only cost its slice.
  plan.grid = static_cast<int32_t>(std::min<int64_t>(grid, shape.max_rows));
  // Few long rows: split each over 2/4/8 CTAs so the certification pass spans
  // the device (the persistent grid would leave most SMs idle).
  if (plan.route == Route::kPersistentSampled && config.enable_kv_split &&
      shape.max_width >= planner::kKvSplit.min_width) {
    for (int32_t split : planner::kKvSplit.splits) {
      if (shape.max_rows * split <= resident) {
        SetKvSplit(shape, split, &plan);
        break;
      }
    }
  }
  // kv_split_force (A/B): every row split, the grid beyond the resident CTAs.
  const int32_t forced_split = CudaForcedSplit(shape, config);
  if (forced_split > 0 &&
      (plan.route == Route::kPersistentSampled || plan.route == Route::kKvSplitSampled)) {
    SetKvSplit(shape, forced_split, &plan);
  }
  // Few long rows on thread-block clusters: each row split over one cluster
  // whose ranks all-reduce through distributed shared memory; clusters take
  // rows in turn.
  if (plan.route == Route::kPersistentSampled || plan.route == Route::kKvSplitSampled) {
    const CudaClusterChoice cluster = CudaChooseCluster(shape, device, config);
    if (cluster.size > 0) SetCluster(shape, cluster, &plan);
  }
  FinishPlan(config, &plan);
  return plan;
}

}  // namespace topk
