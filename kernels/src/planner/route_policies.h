// The routes' policies, as data: each kernel route's compile-time shape
// (threads, CTAs per SM, shared stores, loads in flight) and the measured
// tuning the planner chooses routes and variants by. The kernels take their
// constants from here (kernel_args.h, cluster_state.cuh name them for the
// device code), the planner (cuda_planner.cc) its thresholds; the reasoning
// and measurements are in bench/NOTES.md (## GPU) and docs/kernels.md.
// Plain C++ (host and device), no CUDA headers.
#pragma once

#include <cstdint>

namespace topk::planner {

// Rows with L below this take the exact route inside the sampled kernels
// (the measured crossover, bench/NOTES.md); CudaSelectorConfig's
// min_sampled_length = 0 means this.
inline constexpr int64_t kMinSampledLength = 16384;

// --- The persistent route (persistent_route.cu) and its two variants -------

struct PersistentPolicy {
  int threads;       // per CTA
  int min_blocks;    // __launch_bounds__ CTAs per SM (64 registers in both)
  int candidates;    // frontier A, shared entries (index + key)
  int frontier;      // frontier B, shared entries
  int output;        // committed indices in shared memory (K <= it)
  int admit_unroll;  // 16-byte loads in flight per thread, certification pass
};
// 2 CTAs of 512 threads per SM (~104 KiB shared each).
inline constexpr PersistentPolicy kPersistent512{512, 2, 6144, 4096, 4096, 4};
// 4 CTAs of 256 threads per SM (<= 56 KiB each): the same 64 registers and
// loads in flight per thread, but while one or two CTAs are in their
// latency-bound per-row phases the others keep streaming; smaller frontiers
// (more rows spill candidates to the CTA's slice), K <= 2048 (larger K take
// the 512-thread variant). 2560 = 10 entries per thread (CompactSegments).
inline constexpr PersistentPolicy kPersistent256{256, 4, 2560, 2048, 2048, 4};

// Where the planner takes the 256-thread variant (ctas_per_sm_target = 0;
// measured on the H200, bench/NOTES.md): the persistent sampled route with
// K <= 2048 and N_cap <= max_width (8-16 % faster at 128K and 256K), or
// N_cap <= wide_max_width with M_cap >= wide_min_rows (4-5 % faster at
// 512K); slower at 1M and for M = 512 at 512K, which keep 512 threads.
// 16-bit rows (BF16, FP16) also take it for M_cap >= min_rows_16 up to N_cap
// = max_width_16: 5-13 % faster than 512 threads at 512K and 1M for M
// 1024..8192 ("Selector II"); M = 512 keeps 512 threads there, and wider
// rows were not measured.
struct SmallBlockRegion {
  int64_t max_width;
  int64_t wide_max_width;
  int64_t wide_min_rows;
  int64_t min_rows_16;
  int64_t max_width_16;
};
inline constexpr SmallBlockRegion kSmallBlockRegion{262144, 524288, 4096, 1024, 1048576};

// The certification pass through the shared-memory ring (admit_ring = -1):
// the 256-thread kernel in the FP32 region above, from N_cap = min_width_16
// on 16-bit rows (7-14 % faster at 128K and 256K for M >= 2048) and
// min_width_32 on FP32 rows (1-4 % at 256K and 512K for M >= 2048; 128K up
// to 5 % slower with it). Off in the 512-thread kernel (0-7 % slower with it
// at 512K and 1M) and for 16-bit rows at 1M (3-10 %). ("Selector II".)
struct AdmitRingRegion {
  int64_t min_width_16;
  int64_t min_width_32;
};
inline constexpr AdmitRingRegion kAdmitRingRegion{131072, 262144};

// --- The short-row route (short_row_route.cu) ------------------------------

// One CTA of `threads` per row, at least min_blocks CTAs per SM (the
// 40-register bound that buys it; 8 CTAs at 32 registers measured the same),
// K <= max_k. Its frontiers live in shared memory only (candidates entries
// for the boundary bin, frontier for the next level); a level that does not
// fit re-scans the row, so the route needs no workspace beyond the header.
struct ShortRowPolicy {
  int threads;
  int min_blocks;
  int candidates;
  int frontier;
  int max_k;
};
inline constexpr ShortRowPolicy kShortRow{256, 6, 1024, 512, 4096};

// The route's reach: the widest bucket (N_cap) where it measured faster than
// the persistent routes on the H200, by K and M_cap ("Selector III: short
// rows"; bench/results/h200_short_rows.csv: N 4K..64K x M 256..8192 x K
// 512..2048, the load-aggregated histogram). K above measured_max_k was not
// measured and keeps the persistent routes.
//   K <= small_k: reach_small_k, and reach_small_k_wide for wide_min_rows <=
//     M_cap <= wide_max_rows (K = 512, 64K: 0.69x persistent-sampled's time
//     at M = 256 and 0.91x at M = 1024; 1.12-1.16x at M >= 4096). Fewer rows
//     were not measured against the routes they take now (KV-split at N_cap
//     = 64K for M_cap <= 132 on the H200, one persistent CTA per row
//     otherwise) and keep them.
//   small_k < K <= measured_max_k: reach, and reach_many_rows for M_cap >=
//     many_rows (3-7 % faster than persistent-sampled at M = 4096 and 8192;
//     5 % slower at M = 1024).
struct ShortRowReachTable {
  int32_t small_k;
  int64_t reach_small_k;
  int64_t wide_min_rows;
  int64_t wide_max_rows;
  int64_t reach_small_k_wide;
  int32_t measured_max_k;
  int64_t reach;
  int64_t many_rows;
  int64_t reach_many_rows;
};
inline constexpr ShortRowReachTable kShortRowReach{512,  32768, 256,  1024, 65536,
                                                   2048, 16384, 4096, 32768};

// --- The proposal's sample stride (every sampled route) --------------------

// Where a bucket's rows run in a few waves, a row whose certification
// underfills re-reads itself (the band, or exact recovery) while most of the
// GPU waits for it: the call's tail. Indexer scores cluster by block, and the
// default view (8-float runs, one per 512 positions: stride 64) samples only
// every other 256-position block, so its count spreads wider than sqrt(mu)
// and 0.5-1 % of such rows underfill. One run per 256 positions (stride 32:
// twice the sample loads, the same expected candidates) sees every such
// block. Measured on the H200 (bench/NOTES.md, "The sample stride by
// shape"): band rows 0.4-1.1 % -> 0-0.4 %, 0.78-0.94x the time where rows run
// in 1-8 waves at N_cap <= 256K; 1.02-1.05x at 256K with 2048 rows, at 512K-1M
// and for 8192 x 128K, where the proposal's extra loads (+6-14 us a row on
// long rows) or the many waves outweigh the tail. Buckets with K <= max_k and
// N_cap <= max_width, M_cap <= max_rows of one cell take the dense stride.
struct DenseSampleCell {
  int64_t max_width;
  int64_t max_rows;
};
inline constexpr int32_t kDenseSampleStride = 32;
inline constexpr int32_t kDenseSampleMaxK = 2048;  // measured at K = 512 and 2048
inline constexpr DenseSampleCell kDenseSampling[] = {{65536, 4096}, {131072, 2048}, {262144, 512}};

// --- The KV-split route (kv_split_route.cu) --------------------------------

// Few long rows split over 2/4/8 segment CTAs of the 512-thread variant
// (always: few rows, nothing to overlap across CTAs of one SM); the
// planner splits buckets of N_cap >= min_width when M_cap * split fits the
// resident CTAs, the most segments first.
struct KvSplitPolicy {
  int64_t min_width;
  int32_t splits[3];
};
inline constexpr KvSplitPolicy kKvSplit{65536, {8, 4, 2}};

// --- The cluster route (cluster_route.cu) ----------------------------------

// A rank's shared stores: its certified and band stores (rank_store entries
// each; more spills to its slice) and rank 0's refinement stores, the
// gathered frontier (A) and the next level (B); a row whose admitted set
// exceeds A is refined by re-scanning the row. 1 CTA per SM (up to 128
// registers, the rank's arrays after the arenas) or 2 (64 registers; the
// rank's arrays inside arena B, which only rank 0 uses and only after the
// row's last remote access).
struct ClusterPolicy {
  uint32_t frontier_a;
  uint32_t frontier_b;
  bool arrays_in_arena_b;
};
inline constexpr uint32_t kClusterRankStore = 1024;
inline constexpr ClusterPolicy kCluster1PerSm{8192, 4096, false};
inline constexpr ClusterPolicy kCluster2PerSm{6144, 4096, true};

// Where the planner takes it (cluster_route = 0; measured on the H200, K =
// 2048, "Selector III: decode shapes"): sampled buckets with K <=
// kCudaMaxFastK and N_cap >= min_width on a device with clusters;
// M_cap <= max_rows, N_cap >= table_min_width: 1 CTA per SM; 16 CTAs per
// cluster for one row of N_cap >= min_width_16, 8 elsewhere (faster than
// KV-split at the median, the mean and the p99 on all six shapes); more rows
// keep KV-split / persistent (16 x 1M: KV-split, its band kept apart, 8 %
// faster than the 2-CTAs-per-SM cluster variant at the median and the p99;
// 32 x 512K, 64 x 1M: faster still).
struct ClusterTable {
  int64_t min_width;
  int64_t table_min_width;
  int64_t max_rows;
  int64_t min_width_16;
};
inline constexpr ClusterTable kClusterTable{65536, 131072, 8, 1048576};

// --- The resident decode route (decode_route.cu) --------------------------

// Decode batches (few rows, 16K..512K wide): one launch, one thread-block
// cluster of `cluster` CTAs per row, each rank holding its part of the row in
// shared memory as keys, so the row is read from global memory once and
// every later step (the exact coarse histogram's all-reduce, the gather of
// x >= cut to rank 0, refinement) runs on chip. 512 threads and 1 CTA per SM
// (the slice is up to 128 KiB); rank 0's gathered frontier holds frontier_a
// entries (a row whose admitted set exceeds it is refined by re-scanning the
// row), its next level frontier_b (over its own slice, dead by then). A
// boundary bin of at most `candidates` entries is not gathered: every rank
// gets the bin's entries and ranks its own among them (resident_candidates.cuh).
// Two CTA sizes, one CTA per SM either way: `threads` for the few-row decode
// batches, whose rows are chains of short dependent steps (a 1024-thread
// CTA's barriers and 2048-bin boundary scans cost ~0.5 us more a row), and
// `wide_threads` where a rank streams and gathers many values (M_cap >=
// wide_min_rows, or slices of wide_min_slice_keys): twice the warps per SM
// to cover each warp's dependent steps (one H100; bench/NOTES.md, "fourth
// round": 32-128 rows of 32K 0.87-0.94x the 512-thread time, 64 x 64K and
// 8 x 256K at K = 512 0.93x; 1 and 8 rows of 32K and 64K 1.04-1.11x).
struct ResidentPolicy {
  int threads;
  int min_blocks;
  uint32_t max_slice_keys;  // keys per rank: the route serves N_cap <= 16 x this
  uint32_t frontier_a;
  uint32_t frontier_b;
  int max_cluster;      // CTAs per cluster (16: the H100/H200's non-portable size)
  uint32_t candidates;  // the shared bin's entries (a warp ranks one among them)
  int wide_threads;     // the band's CTA (64 registers a thread)
  int64_t wide_min_rows;
  int64_t wide_min_slice_keys;
};
inline constexpr ResidentPolicy kResident{512, 1, 32768, 6144, 4096, 16, 512, 1024, 32, 32768};

// Where the planner takes it (resident_route = 0, nothing else forced): the
// cells where it measured faster than the routes it replaces (bench/NOTES.md,
// "Selector V"; bench/results/h100_decode_region.csv: the route forced beside
// the planner's route without it, same rows, same call, one H100). A bucket's
// K band is the smallest cell max_k >= K; it takes the route when N_cap >=
// kResidentMinWidth and one cell of its band holds N_cap and M_cap. Measured
// and not taken: 64 or more rows of 128K at K = 2048 (1.23-1.96x the
// previous routes), 128 or more rows of 64K and 32 or more of 256K at K <=
// 1024 (0.96-2.96x; 128 x 64K is 0.96x at K = 1024 and 1.00x at 512, no
// gain): with one CTA per SM the rows run in waves and each rank's
// shared-memory histogram and gather are per-value work on one SM. K above
// 2048 was not measured.
struct ResidentCell {
  int32_t max_k;
  int64_t max_width;
  int64_t max_rows;
};
inline constexpr int64_t kResidentMinWidth = 16384;
inline constexpr ResidentCell kResidentRegion[] = {
    {1024, 65536, 64},   // 1-64 rows of 64K: 0.62-0.83x
    {1024, 262144, 8},   // 1 and 8 rows of 256K: 0.74-1.00x
    {2048, 32768, 256},  // 1-256 rows of 32K: 0.34-0.95x
    {2048, 131072, 32},  // 32 rows of 128K: 0.86x
    {2048, 262144, 8},   // 1 and 8 rows of 128K, 8 of 256K: 0.61-0.83x
};

}  // namespace topk::planner
