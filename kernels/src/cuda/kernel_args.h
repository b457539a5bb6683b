// Argument blocks shared by the host launcher and the kernels (plain structs,
// no CUDA headers).
#pragma once

#include <cstdint>

#include "route_policies.h"
#include "topk/contract.h"
#include "topk/cuda/route_stats.h"

namespace topk::cuda {

// The routes' compile-time shapes come from their policies
// (kernels/src/planner/route_policies.h); these are the kernels' names.

// The short-row route (short_row_route.cu), planner::kShortRow.
inline constexpr int kShortRowThreads = planner::kShortRow.threads;
inline constexpr int kShortRowMinBlocks = planner::kShortRow.min_blocks;
inline constexpr int kShortRowCandidates = planner::kShortRow.candidates;
inline constexpr int kShortRowFrontier = planner::kShortRow.frontier;
inline constexpr int kShortRowMaxK = planner::kShortRow.max_k;

// Per-call arguments, passed by value (Run() launches with them; a graph
// replay writes them into the captured kernel node). The kernels still
// accept a device pointer to a block instead (dev_args), unused by the
// selector's own launches.
struct DeviceArgs {
  const void* scores = nullptr;  // elements of the plan's ScoreType (KernelParams::dtype)
  int64_t pitch = 0;
  const int64_t* row_offsets = nullptr;
  const int32_t* lengths = nullptr;
  int32_t* indices = nullptr;
  RowStatus* row_status = nullptr;
  int64_t num_rows = 0;  // live M
  int64_t width = 0;     // N: lengths above it are kBadLength
  int32_t layout = 0;    // Layout
  int32_t pad = 0;
};

// Per-plan constants of a launch.
struct KernelParams {
  int32_t k = 0;
  int32_t sample_stride = 0;  // 0: exact route for every row
  int32_t sample_run = 1;
  int32_t sorted = 0;
  int32_t deterministic = 0;
  // ScoreType of the rows: picks the kernel's row view (FP32 or 16-bit) and,
  // for 16-bit rows, BF16 or FP16 widening.
  int32_t dtype = 0;
  int32_t prefetch = 0;  // L2 bulk prefetch ahead of the certification pass
  // 1: the launcher zeroes the row-claim counters first (Run: any workspace);
  // 0: they are already zero (graph replays: the runner zeroed them once and
  // every launch leaves them zero), so the graph has no memset node for them.
  int32_t zero_counters = 1;
  int64_t min_sampled_length = 0;
  // The rank the CTA slices were sized for: min(K, N_cap) (CudaStagedK).
  // Rows are never longer than N_cap, so no row commits more than that; it
  // decides whether the output stages in shared memory or in the slice.
  int32_t staged_k = 0;
  int64_t slice_entries = 0;            // G: global overflow entries per slice
  uint32_t* counters = nullptr;         // [0] row claim counter, [1] finished CTAs
  unsigned long long* stats = nullptr;  // kNumStats counters, in Stat order
  uint8_t* cta_slices = nullptr;        // grid x CtaSliceBytes
  int64_t cta_slice_bytes = 0;
  // KV-split only: CTAs per row and the per-row shared state (RowState*).
  int32_t split = 1;
  // Persistent kernel variant: threads per CTA, kThreads (2 CTAs/SM) or
  // kSmallThreads (4 CTAs/SM). The KV-split kernel always runs kThreads.
  int32_t block = 512;
  uint8_t* row_state = nullptr;
  int64_t max_rows = 0;
  int64_t row_entries = 0;  // candidate entries per row buffer
  // Cluster route only (split = CTAs per cluster): its kernel variant, 1 or 2
  // CTAs per SM.
  int32_t cluster_ctas_per_sm = 1;
  // Persistent route: the certification pass through the shared-memory ring
  // (1) or register loads (0): CudaUseAdmitRing.
  int32_t admit_ring = 0;
  // KV-split only: 1 keeps the band in its own buffer (kv_split_band).
  int32_t kv_band = 0;
  // Short-row route only: CudaSelectorConfig::short_row_variant.
  int32_t short_row_variant = 0;
  // kShortRowSharedRow: bytes of the CTA's row buffer (0: none; rows whose
  // body does not fit are read from global memory).
  int32_t short_row_buffer_bytes = 0;
  // Diagnostics (CudaSelectorConfig::row_trace): per row kTraceWords words of
  // %globaltimer stamps written by SelectRow's thread 0; null: off.
  unsigned long long* row_trace = nullptr;
  // Resident decode route only (split = CTAs per cluster): keys per rank's
  // slice, ceil(N_cap / split) (its dynamic shared memory follows from it).
  // Last, so that the other routes' parameters keep their offsets.
  int32_t resident_slice_keys = 0;
};

// row_trace layout per row: the row's start and end (ns, %globaltimer), the
// SM that started it, and (one CTA per row) its clock64 cycles from start to
// end. The words between are for stamps between the phases, which are not
// written: they cost the certification pass registers (0 = not stamped).
inline constexpr int kTraceWords = 8;
enum TraceWord : int {
  kTraceStart = 0,
  kTraceProposal = 1,
  kTraceAdmit = 2,
  kTraceRefine = 3,
  kTraceFinalize = 4,
  kTraceSm = 5,
  kTraceCycles = 6,
};

// The route counters in the workspace (one per TOPK_CUDA_ROUTE_STATS entry).
#define TOPK_CUDA_STAT_ENUMERATOR(field, enumerator) enumerator,
enum class Stat : int { TOPK_CUDA_ROUTE_STATS(TOPK_CUDA_STAT_ENUMERATOR) kCount };
#undef TOPK_CUDA_STAT_ENUMERATOR
inline constexpr int kNumStats = static_cast<int>(Stat::kCount);

// The persistent kernel's variants (shared-memory capacities in entries):
// planner::kPersistent512 (2 CTAs/SM; the KV-split and cluster kernels run
// its 512 threads too) and planner::kPersistent256 (4 CTAs/SM, K <= 2048).
inline constexpr int kThreads = planner::kPersistent512.threads;
inline constexpr int kSmemCandidates = planner::kPersistent512.candidates;  // frontier A
inline constexpr int kSmemFrontier = planner::kPersistent512.frontier;      // frontier B
inline constexpr int kSmemOutput = planner::kPersistent512.output;          // K <= kCudaMaxFastK
inline constexpr int kSmallThreads = planner::kPersistent256.threads;
inline constexpr int kSmallCandidates = planner::kPersistent256.candidates;
inline constexpr int kSmallFrontier = planner::kPersistent256.frontier;
inline constexpr int kSmallMaxK = planner::kPersistent256.output;

// Compile-time facts of a variant, by threads per CTA.
template <int kBlock>
struct PersistentVariant;
template <>
struct PersistentVariant<kThreads> {
  static constexpr int kMinBlocks = planner::kPersistent512.min_blocks;
  static constexpr int kCandidates = kSmemCandidates;
  static constexpr int kFrontier = kSmemFrontier;
  static constexpr int kOutput = kSmemOutput;
  static constexpr int kAdmitUnroll = planner::kPersistent512.admit_unroll;
};
// The resident decode route's wide CTA (its kernel runs the shared phases,
// not the persistent kernel's admission): only the committed-index staging
// is sized. Its 512-thread CTA is kThreads's.
template <>
struct PersistentVariant<planner::kResident.wide_threads> {
  static constexpr int kOutput = kSmemOutput;
};
template <>
struct PersistentVariant<kSmallThreads> {
  static constexpr int kMinBlocks = planner::kPersistent256.min_blocks;
  static constexpr int kCandidates = kSmallCandidates;
  static constexpr int kFrontier = kSmallFrontier;
  static constexpr int kOutput = kSmallMaxK;
  static constexpr int kAdmitUnroll = planner::kPersistent256.admit_unroll;
};

}  // namespace topk::cuda
