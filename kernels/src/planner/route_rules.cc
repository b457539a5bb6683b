// The rules' measured regions, as the public functions cuda_selector.h names
// (the selector and the tests ask them too): where the short-row route
// reaches, where the 256-thread variant and the admit ring pay, the forced
// KV split, the cluster route's shape. The numbers are route_policies.h's.
#include <algorithm>

#include "route_choice.h"
#include "route_policies.h"
#include "topk/cuda_selector.h"

namespace topk {

namespace {
// Where the 256-thread kernel measured faster on FP32 rows.
bool SmallBlockFp32Region(const ProblemShape& shape) {
  return shape.max_width <= planner::kSmallBlockRegion.max_width ||
         (shape.max_width <= planner::kSmallBlockRegion.wide_max_width &&
          shape.max_rows >= planner::kSmallBlockRegion.wide_min_rows);
}
}  // namespace

namespace planner {
bool PlannerChoosesFreely(const CudaSelectorConfig& config) {
  return config.enable_sampling && config.enable_short_rows && config.enable_kv_split &&
         config.short_row_max_width == 0 && config.cluster_route == 0 && config.cluster_size == 0 &&
         config.cluster_ctas_per_sm == 0 && config.ctas_per_sm_target == 0 &&
         config.kv_split_force == 0 && config.grid_override == 0 && config.sample_stride == 0 &&
         config.min_sampled_length == 0;
}

bool InResidentRegion(const ProblemShape& shape) {
  if (shape.max_width < kResidentMinWidth) return false;
  int32_t band = 0;
  for (const ResidentCell& cell : kResidentRegion) {
    if (cell.max_k >= shape.k && (band == 0 || cell.max_k < band)) band = cell.max_k;
  }
  for (const ResidentCell& cell : kResidentRegion) {
    if (cell.max_k == band && shape.max_width <= cell.max_width &&
        shape.max_rows <= cell.max_rows) {
      return true;
    }
  }
  return false;
}

int ClustersOf(const CudaDeviceInfo& device, int size, int ctas_per_sm) {
  if (ctas_per_sm == 2) {
    return size == 16 ? device.dense_clusters_of_16 : (size == 8 ? device.dense_clusters_of_8 : 0);
  }
  return size == 16 ? device.clusters_of_16 : (size == 8 ? device.clusters_of_8 : 0);
}
}  // namespace planner

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
  c.clusters = planner::ClustersOf(device, c.size, c.ctas_per_sm);
  if (c.clusters <= 0) return {};
  return c;
}

int64_t CudaResidentSliceKeys(int64_t max_width, int32_t cluster_size) {
  return (max_width + cluster_size - 1) / cluster_size;
}

// Enough ranks for the row to fit their slices; past that, the largest
// cluster whose M_cap clusters are resident at once (one wave): few rows
// spread over many SMs, more rows keep a wave. Past one wave even at the
// size the width needs, that size (the most rows in flight).
int CudaResidentClusterSize(const ProblemShape& shape, const CudaDeviceInfo& device,
                            const CudaSelectorConfig& config) {
  const planner::ResidentPolicy& r = planner::kResident;
  if (config.resident_route < 0 || !config.enable_sampling || device.resident_clusters[4] <= 0 ||
      shape.k > kCudaMaxFastK || shape.max_width > int64_t{r.max_cluster} * r.max_slice_keys) {
    return 0;
  }
  if (config.resident_route == 0 &&
      (!planner::PlannerChoosesFreely(config) || !planner::InResidentRegion(shape))) {
    return 0;
  }
  int need = 0;  // log2 of the size
  while ((int64_t{r.max_slice_keys} << need) < shape.max_width) ++need;
  if (config.resident_cluster_size > 0) return std::max(1 << need, config.resident_cluster_size);
  for (int size = 4; size > need; --size) {
    if (shape.max_rows <= device.resident_clusters[size]) return 1 << size;
  }
  return 1 << need;
}

// The band's CTA where a rank streams and gathers many values: many rows
// (every SM busy with its own) or wide slices (planner::kResident).
int CudaResidentThreads(const ProblemShape& shape, int32_t cluster_size,
                        const CudaSelectorConfig& config) {
  const planner::ResidentPolicy& r = planner::kResident;
  if (config.resident_threads > 0) return config.resident_threads;
  const bool band = shape.max_rows >= r.wide_min_rows ||
                    CudaResidentSliceKeys(shape.max_width, cluster_size) >= r.wide_min_slice_keys;
  return band ? r.wide_threads : r.threads;
}

}  // namespace topk
