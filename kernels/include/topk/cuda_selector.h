// The CUDA backend (docs/design.md section 3). Host-only header: no CUDA headers, so
// C++ code built without nvcc (the server) can include it. Every pointer in the
// RowBatch / OutputView handed to Run() is a DEVICE pointer; RunContext.stream
// is a cudaStream_t and RunContext.workspace device memory of at least
// plan.workspace_bytes (its contents on entry do not matter).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "topk/cuda/route_stats.h"
#include "topk/cuda/short_row_variant.h"
#include "topk/selector.h"

namespace topk {

// The device facts the planner needs; filled from cudaGetDeviceProperties and
// the occupancy API by CudaSelector, or by hand in tests (no device needed).
struct CudaDeviceInfo {
  int sm_count = 0;
  int compute_major = 0;
  int compute_minor = 0;
  size_t l2_bytes = 0;
  size_t global_mem_bytes = 0;
  // Resident CTAs per SM of the persistent kernel (occupancy API): the
  // 512-thread variant, and the 256-thread one (0: not available).
  int persistent_ctas_per_sm = 0;
  int small_block_ctas_per_sm = 0;
  // Clusters of the cluster route resident at once, of 8 CTAs and of 16
  // (non-portable size), with 1 CTA per SM and with 2 (dense_); 0: not
  // available (before sm_90, or does not fit).
  int clusters_of_8 = 0;
  int clusters_of_16 = 0;
  int dense_clusters_of_8 = 0;
  int dense_clusters_of_16 = 0;
  // Clusters of the resident decode route's kernel resident at once, of 1, 2,
  // 4, 8 and 16 CTAs (index log2 of the size; one CTA per SM whatever its
  // slice); all 0 (before sm_90): the route is not offered. A cluster must
  // fit one GPC, so 16-CTA clusters are fewer than SMs / 16.
  int resident_clusters[5] = {0, 0, 0, 0, 0};
};

struct CudaSelectorConfig {
  int device = 0;
  // The planner's measured route table (kernels/src/planner/route_table.h)
  // for the buckets it covers; false: the rules alone (the table's A/B
  // baseline). A configuration that forces a route keeps the rules anyway.
  bool use_route_table = true;
  // false: every row takes exact coarse recovery (Route::kRowLocalExact); the
  // benchmark's "sampling off" baseline.
  bool enable_sampling = true;
  // s; 0: the planner's choice (32 where a bucket's rows run in a few waves,
  // route_policies.h kDenseSampling; 64 elsewhere). 32, 64, 128 or 256 pins it
  // for every bucket (and keeps the rules: an A/B setting).
  int32_t sample_stride = 0;
  // Consecutive floats read per view position group: 1 is the paper's view
  // (one float every s positions, one 32-byte sector per sample); 8 reads whole
  // sectors with the same sample count (L*4/s bytes instead of L*32/s).
  int32_t sample_run = 8;
  // Rows shorter than this take the exact route inside the sampled kernel;
  // 0: the planner's default (16384, the measured crossover:
  // route_policies.h, kMinSampledLength).
  int64_t min_sampled_length = 0;
  // Bulk-prefetch (cp.async.bulk.prefetch.L2) the certification pass's next
  // chunks and each sampled row's head, to keep more bytes in flight than the
  // registers hold and to overlap the proposal with the row's first DRAM reads.
  // Off by default: measured slower on every shape >= 256K (bench/NOTES.md).
  bool l2_prefetch = false;
  // Few long rows (M_cap * 2 <= resident CTAs, N_cap >= 64K: route_policies.h,
  // KvSplitPolicy):
  // the KV-split sampled kernel, 2/4/8 CTAs per row (measured 1.1-2.5x faster
  // than one CTA per row for M <= 64, bench/NOTES.md).
  bool enable_kv_split = true;
  // KV-split: each segment CTA keeps the band (t1 <= x < t0) apart in a second
  // per-row buffer in the same pass, so a row whose certified set underfills K
  // is finished from certified + band without re-running on one CTA (which
  // makes the route's p99 2-5x its p50); rows whose band underfills too still
  // take the one-CTA path. Costs a second buffer per row of workspace
  // (CudaKvRowEntries x 8 bytes: 176 KiB per row at K = 2048).
  bool kv_split_band = true;
  // Persistent kernel variant: 2 CTAs/SM of 512 threads (104 KiB shared,
  // 64 registers, 4 loads in flight per thread), 4 CTAs/SM of 256 threads
  // (56 KiB, the same registers and loads in flight; more CTAs to cover each
  // other's latency-bound per-row phases; K <= 2048 only, larger K take the
  // 512-thread variant), or 0: the planner's choice per shape
  // (CudaUseSmallBlocks: 4 x 256 where it measured faster). The
  // KV-split route always runs 512 threads. Default 0: the per-shape choice
  // (bench/NOTES.md).
  int ctas_per_sm_target = 0;
  // The persistent route's certification pass reads the row through a ring of
  // asynchronous copies into shared memory (more bytes in flight than the
  // registers hold) instead of register loads: 1 on, 0 off, -1 the planner's
  // per-shape choice (CudaUseAdmitRing; bench/NOTES.md, "Selector II").
  int admit_ring = -1;
  // Short rows: one 256-thread CTA per row, several rows in flight per SM, no
  // sampling (Route::kShortRowExact), on the buckets where CudaShortRowReach
  // says it measured faster than the persistent routes. false: those buckets
  // keep the persistent routes.
  bool enable_short_rows = true;
  // > 0: every bucket with N_cap up to this width and K <= 4096 takes the
  // short-row route whatever the table says (A/B measurements); 0: the table.
  int64_t short_row_max_width = 0;
  // The short-row kernel's variant, a bit set of topk/cuda/short_row_variant.h
  // (A/B measurements, bench/NOTES.md "Selector III: short rows").
  int short_row_variant = kShortRowDefaultVariant;
  // Few long rows on one thread-block cluster per row (Route::kClusterSampled,
  // sm_90+): 0 the planner's table (CudaUseClusterRoute), 1 every bucket the
  // route serves (A/B measurements), -1 never.
  int cluster_route = 0;
  // CTAs per cluster: 8 (portable) or 16 (non-portable, H100/H200); 0: the
  // planner's choice.
  int cluster_size = 0;
  // The cluster kernel's variant: 1 CTA per SM (152 KiB of shared memory, up
  // to 128 registers) or 2 (104 KiB, 64 registers, twice the resident
  // clusters); 0: the planner's choice.
  int cluster_ctas_per_sm = 0;
  // Decode batches on the resident route (Route::kResidentDecode, sm_90+):
  // 0 the planner's region (route_policies.h, kResidentRegion), 1 every
  // bucket the route serves (A/B measurements), -1 never.
  int resident_route = 0;
  // Its CTAs per cluster (1, 2, 4, 8 or 16; at least what the row's width
  // needs); 0: the planner's choice.
  int resident_cluster_size = 0;
  // Its threads per CTA (512 or 1024: route_policies.h, kResident); 0: the
  // planner's choice.
  int resident_threads = 0;
  // Planner override of the persistent grid (0: occupancy * SMs).
  int32_t grid_override = 0;
  // > 0: every sampled bucket with N_cap >= 64K (KvSplitPolicy) takes the
  // KV-split route with this many CTAs per row (2, 4 or 8), whatever M_cap:
  // the grid may exceed the resident CTAs (the segment CTAs need no
  // co-residency). A/B only: at M = 512 and 1024 it measured 1.09-2.2x
  // slower than the persistent route (bench/NOTES.md, "Selector II", item
  // 4). 0: the planner's rule (few rows only).
  int32_t kv_split_force = 0;
  // Diagnostics: a device array of max_rows x 8 words in which every row that
  // SelectRow or the KV-split kernel selects stamps its start and end on
  // %globaltimer (kernel_args.h, kTraceWords; topk-bench-gpu --trace); null
  // (the default) costs one predicate per row.
  unsigned long long* row_trace = nullptr;
};

// The planner's tuning (the measured thresholds by which it picks routes and
// kernel variants) is internal: the routes' policies in
// kernels/src/planner/route_policies.h. The limits of the API:
// Largest K served with shared-memory output staging (fast paths).
inline constexpr int32_t kCudaMaxFastK = 4096;
// Largest K served at all (general path, global staging).
inline constexpr int32_t kCudaMaxK = 1 << 20;

// CTAs per row that kv_split_force asks of a sampled bucket (0: none).
int32_t CudaForcedSplit(const ProblemShape& shape, const CudaSelectorConfig& config);

// The planner's persistent variant for ctas_per_sm_target == 0: the
// 256-thread kernel (4 CTAs/SM) where it measured faster (route_policies.h,
// SmallBlockRegion).
bool CudaUseSmallBlocks(const ProblemShape& shape, const CudaDeviceInfo& device,
                        const CudaSelectorConfig& config);

// The certification pass through the shared-memory ring (admit_ring = -1):
// where it measured faster in the 256-thread kernel (route_policies.h,
// AdmitRingRegion). block: the plan's.
bool CudaUseAdmitRing(const ProblemShape& shape, int32_t block, const CudaSelectorConfig& config);

// The widest bucket (N_cap) the short-row route takes for rank k and M_cap
// rows, where it measured faster than the persistent routes; 0: none
// (route_policies.h, ShortRowReachTable).
int64_t CudaShortRowReach(int32_t k, int64_t max_rows);

// The cluster route (Route::kClusterSampled) serves sampled buckets with
// K <= kCudaMaxFastK and wide rows on a device with clusters; the planner's
// table (cluster_route = 0) takes it for few rows (route_policies.h,
// ClusterTable).
struct CudaClusterChoice {
  int size = 0;  // CTAs per cluster; 0: not the cluster route
  int ctas_per_sm = 0;
  int clusters = 0;  // resident clusters of that variant
};
CudaClusterChoice CudaChooseCluster(const ProblemShape& shape, const CudaDeviceInfo& device,
                                    const CudaSelectorConfig& config);

// The resident decode route (Route::kResidentDecode) serves buckets with
// K <= kCudaMaxFastK and N_cap up to 16 slices on a device with clusters;
// the planner takes it in its measured region (resident_route = 0;
// route_policies.h, kResidentRegion). Its CTAs per cluster for the bucket,
// 0 where it does not take it; the keys each rank's slice holds; and the
// threads of its CTAs at that size.
int CudaResidentClusterSize(const ProblemShape& shape, const CudaDeviceInfo& device,
                            const CudaSelectorConfig& config);
int64_t CudaResidentSliceKeys(int64_t max_width, int32_t cluster_size);
int CudaResidentThreads(const ProblemShape& shape, int32_t cluster_size,
                        const CudaSelectorConfig& config);

// Per-CTA global overflow entries of each candidate/frontier slice.
int64_t CudaSliceEntries(int32_t k);
// Workspace bytes of the CTA slices of a plan of `grid` CTAs for rank k (the
// KV-split route adds per-row state: CudaKvRowEntries candidates per row).
size_t CudaWorkspaceBytes(int32_t k, int32_t grid);
// The rank the CTA slices are sized for: min(k, max_width) (at least 1). A row
// of L <= max_width commits at most L indices, so K beyond every row costs no
// workspace (the output rows still hold K slots).
int32_t CudaStagedK(int32_t k, int64_t max_width);
int64_t CudaKvRowEntries(int32_t k);

// OkStatus for the score types the CUDA kernels serve (FP32, BF16 and FP16,
// every route); INVALID_ARGUMENT for a value that is no ScoreType. Checked by
// the planner and by every run. Rows of a 16-bit type start on any 2-byte
// boundary, FP32 rows on any 4-byte boundary.
absl::Status CheckCudaScoreType(ScoreType dtype);

// The planner: a pure host function (unit-tested without a device).
absl::StatusOr<Plan> PlanCudaSelection(const ProblemShape& shape, const SelectOptions& options,
                                       const CudaDeviceInfo& device,
                                       const CudaSelectorConfig& config);

// Which path rows took and where the cycles went, one field per entry of
// TOPK_CUDA_ROUTE_STATS (topk/cuda/route_stats.h, which says what each
// counts); accumulated in the workspace across runs until ResetStats.
struct CudaRouteStats {
#define TOPK_CUDA_STAT_FIELD(field, enumerator) int64_t field = 0;
  TOPK_CUDA_ROUTE_STATS(TOPK_CUDA_STAT_FIELD)
#undef TOPK_CUDA_STAT_FIELD
};

class CudaSelector final : public Selector {
 public:
  static absl::StatusOr<std::unique_ptr<CudaSelector>> Create(CudaSelectorConfig config = {});
  ~CudaSelector() override;

  std::string_view name() const override { return "cuda"; }
  absl::StatusOr<Plan> MakePlan(const ProblemShape& shape,
                                const SelectOptions& options) const override;
  // Asynchronous on context.stream; errors are launch/configuration errors.
  absl::Status Run(const Plan& plan, const RowBatch& batch, const OutputView& out,
                   const RunContext& context) override;

  const CudaDeviceInfo& device_info() const { return info_; }
  const CudaSelectorConfig& config() const { return config_; }

  // Route counters kept in the workspace (synchronises the stream).
  absl::StatusOr<CudaRouteStats> ReadStats(const RunContext& context) const;
  absl::Status ResetStats(const RunContext& context) const;
  // The persistent kernel's row counters (0 after every completed run).
  absl::StatusOr<std::pair<uint32_t, uint32_t>> ReadCounters(const RunContext& context) const;

 private:
  CudaSelector(CudaSelectorConfig config, CudaDeviceInfo info);
  CudaSelectorConfig config_;
  CudaDeviceInfo info_;
};

// One captured CUDA graph per plan: the route's kernel node (and, on the
// KV-split route, the memset of its per-row state). Replay() writes the
// batch's arguments (row pointers/offsets, lengths, output, live M) into the
// executable graph's kernel node by value and launches it, so the same graph
// serves every batch of the plan's bucket and the host never waits: replays
// may run ahead of the device. The row-claim counters are zeroed once here
// and kept zero by the kernels themselves (re-zeroed after a failed launch).
class CudaGraphRunner {
 public:
  static absl::StatusOr<std::unique_ptr<CudaGraphRunner>> Create(const CudaSelector& selector,
                                                                 const Plan& plan,
                                                                 const RunContext& context);
  ~CudaGraphRunner();
  CudaGraphRunner(const CudaGraphRunner&) = delete;
  CudaGraphRunner& operator=(const CudaGraphRunner&) = delete;

  // Launches the graph on `stream` (nullptr: the capture stream) with this
  // batch's arguments; returns without waiting for the device. Replays of one
  // runner share its workspace, so they must be ordered (one stream).
  absl::Status Replay(const RowBatch& batch, const OutputView& out, void* stream = nullptr);

 private:
  struct Impl;
  explicit CudaGraphRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace topk
