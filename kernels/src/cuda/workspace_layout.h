// The workspace of a CUDA plan, in one place: the planner sizes it
// (PlanCudaSelection's workspace_bytes), the selector carves it into the
// kernel's pointers (MakeParams), and the kernels address their buffers in it
// (MakeCtaStores, the cluster ranks' stores, the KV-split row state), all
// through this header (plain C++, no CUDA headers; the device helpers are
// __host__ __device__ under nvcc).
//
//   [header, kHeaderBytes: row-claim counters at kCountersOffset, route
//    statistics at kStatsOffset]
//   [grid x CTA slice, CtaSliceBytes each]     every route but the short-row one
//   [KV-split row state, RowStateBytes]        the KV-split route only
//
// A CTA slice, in 32-bit words (g = slice entries): frontier A's indices
// [0, g) and keys [g, 2g), frontier B's indices [2g, 3g) and keys [3g, 4g);
// then, when the staged rank exceeds the shared output, the output staging
// (staged_k indices, rounded up to even) and the sort scratch (pow2(staged_k)
// 64-bit keys). The row state: max_rows RowHeaders (zeroed before every
// launch), then max_rows certified buffers of row_entries (index, key) pairs,
// then (kv_split_band) max_rows band buffers.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernel_args.h"

#if defined(__CUDACC__)
#define TOPK_LAYOUT_FN __host__ __device__ __forceinline__
#else
#define TOPK_LAYOUT_FN inline
#endif

namespace topk::cuda {

// The header: a 1 KiB block of counters and statistics before the slices.
inline constexpr int64_t kHeaderBytes = 1024;
inline constexpr int64_t kCountersOffset = 0;
inline constexpr int64_t kStatsOffset = 64;
static_assert(kStatsOffset + kNumStats * 8 <= kHeaderBytes, "the counters fit the header");

// Candidate entries per frontier part of a slice for rank k (the rank the
// slices are sized for, StagedK).
inline int64_t SliceEntries(int32_t k) { return std::max<int64_t>(4 * int64_t{k}, 16384); }

// The rank the CTA slices are sized for: min(k, max_width), at least 1. A row
// of L <= max_width commits at most L indices, so K beyond every row costs no
// workspace (the output rows still hold K slots).
inline int32_t StagedK(int32_t k, int64_t max_width) {
  return static_cast<int32_t>(std::max<int64_t>(1, std::min<int64_t>(k, max_width)));
}

inline int64_t NextPow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}
// One CTA slice: A (idx, key) x G, B (idx, key) x G, and for K above the
// shared output capacity an output staging array (K) and a sort scratch
// (pow2(K) 64-bit keys); 256-byte aligned.
inline int64_t CtaSliceBytes(int32_t k, int64_t slice_entries) {
  int64_t bytes = 4 * slice_entries * 4;  // A idx, A key, B idx, B key
  if (k > kSmemOutput) bytes += 4 * (int64_t{k} + 2) + 8 * NextPow2(k);
  return (bytes + 255) / 256 * 256;
}

// One CTA's slice, as the kernels address it (32-bit words from its base):
// the kernels' own expressions (g 32-bit; the sort offset by the staged rank
// rounded up to even).
struct CtaSlice {
  uint32_t* base;
  uint32_t g;  // slice entries
  TOPK_LAYOUT_FN uint32_t* AIdx() const { return base; }
  TOPK_LAYOUT_FN uint32_t* AKey() const { return base + g; }
  TOPK_LAYOUT_FN uint32_t* BIdx() const { return base + 2 * g; }
  TOPK_LAYOUT_FN uint32_t* BKey() const { return base + 3 * g; }
  TOPK_LAYOUT_FN uint32_t* Out() const { return base + 4 * g; }
  // The sort scratch after the staged_k committed indices (offset by
  // staged_k, not K: K beyond every row would place it past the slice).
  TOPK_LAYOUT_FN uint64_t* Sort(int32_t staged_k) const {
    return reinterpret_cast<uint64_t*>(base + 4 * g + ((staged_k + 1) & ~1));
  }
};
// The base of CTA cta's slice (KernelParams::cta_slices, cta_slice_bytes).
TOPK_LAYOUT_FN uint32_t* CtaSliceBase(const KernelParams& p, uint32_t cta) {
  return reinterpret_cast<uint32_t*>(p.cta_slices + cta * p.cta_slice_bytes);
}

// KV-split per-row state: one header per row, zeroed before every launch
// (one memset of RowStateZeroBytes). The finisher builds the level-0
// histogram from the candidates themselves, so no per-row histogram is kept.
struct RowHeader {
  uint32_t arrival;  // segment CTAs done
  uint32_t count;    // admitted candidates
  uint32_t nan;
  uint32_t neg_min_key;  // ~(smallest admitted key), 0: none (atomicMax)
  // kv_split_band only: the band t1 <= x < t0, kept apart in its own buffer.
  uint32_t band_count;
  uint32_t band_neg_min_key;
};
constexpr int64_t RowStateZeroBytes(int64_t max_rows) {
  return max_rows * static_cast<int64_t>(sizeof(RowHeader));
}
// Candidate entries per KV-split row buffer for rank k: a slice's entries
// plus the 512-thread variant's frontier A.
inline int64_t KvRowEntries(int32_t k) { return SliceEntries(k) + kSmemCandidates; }
// band: a second buffer per row (kv_split_band), after every row's first.
inline int64_t RowStateBytes(int64_t max_rows, int64_t row_entries, bool band = false) {
  const int64_t buffers = band ? 2 : 1;
  return (RowStateZeroBytes(max_rows) + buffers * max_rows * 8 * row_entries + 255) / 256 * 256;
}

// The row state as the KV-split kernel addresses it (KernelParams::row_state,
// max_rows, row_entries): the headers, the buffers after them, and row r's
// certified buffer (indices, then keys) and band buffer (after every row's
// certified one).
TOPK_LAYOUT_FN RowHeader* RowHeaders(const KernelParams& p) {
  return reinterpret_cast<RowHeader*>(p.row_state);
}
TOPK_LAYOUT_FN uint32_t* RowBuffers(const KernelParams& p) {
  return reinterpret_cast<uint32_t*>(p.row_state + RowStateZeroBytes(p.max_rows));
}
TOPK_LAYOUT_FN uint32_t* CertifiedBuffer(const KernelParams& p, uint32_t* bufs, int64_t r) {
  return bufs + r * 2 * p.row_entries;
}
TOPK_LAYOUT_FN uint32_t* BandBuffer(const KernelParams& p, uint32_t* bufs, int64_t r) {
  return bufs + (p.max_rows + r) * 2 * p.row_entries;
}

// What a route keeps in the workspace beyond the header.
enum class WorkspaceParts : int {
  kHeaderOnly,         // the short-row route (frontiers in shared memory only)
  kSlices,             // the persistent and cluster routes
  kSlicesAndRowState,  // the KV-split route
};

// A plan's workspace: byte offsets from its base and the sizes the kernels
// are given (KernelParams).
struct WorkspaceLayout {
  int32_t staged_k = 0;          // StagedK(k, max_width)
  int64_t slice_entries = 0;     // SliceEntries(staged_k)
  int64_t slices_offset = 0;     // the first CTA slice
  int64_t slice_bytes = 0;       // CtaSliceBytes(staged_k, slice_entries)
  int64_t row_entries = 0;       // kSlicesAndRowState: KvRowEntries(k)
  int64_t row_state_offset = 0;  // kSlicesAndRowState: after the grid's slices
  int64_t total_bytes = 0;
};
inline WorkspaceLayout LayoutWorkspace(WorkspaceParts parts, int32_t k, int64_t max_width,
                                       int32_t grid, int64_t max_rows, bool band) {
  WorkspaceLayout w;
  w.staged_k = StagedK(k, max_width);
  w.slice_entries = SliceEntries(w.staged_k);
  w.slices_offset = kHeaderBytes;
  w.slice_bytes = CtaSliceBytes(w.staged_k, w.slice_entries);
  if (parts == WorkspaceParts::kHeaderOnly) {
    w.total_bytes = kHeaderBytes;
    return w;
  }
  w.total_bytes = kHeaderBytes + int64_t{grid} * w.slice_bytes;
  if (parts == WorkspaceParts::kSlicesAndRowState) {
    w.row_entries = KvRowEntries(k);
    w.row_state_offset = w.total_bytes;
    w.total_bytes += RowStateBytes(max_rows, w.row_entries, band);
  }
  return w;
}

}  // namespace topk::cuda
