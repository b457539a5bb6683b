// The persistent sampled selector (DESIGN section 3): one CTA (512 threads x 2
// per SM, or 256 x 4: the kB template parameter of every device helper) owns
// a row through all three phases; the grid is the device's resident CTAs; the
// first wave takes rows by block id, later rows are claimed from a device
// counter that the last CTA to finish resets (and that the launcher zeroes
// with a captured memset, so garbage workspaces and graph replays are safe).
#include "persistent_kernel.cuh"
#include "refine.cuh"
#include "register_exact.cuh"
#include "topk/algorithm_constants.h"
#include "topk/contract.h"

namespace topk::cuda {
namespace {

enum Stat {
  kRows,
  kSampled,
  kCertified,
  kBandRescued,
  kExactRecovery,
  kExactRows,
  kCands,
  kRescans,
  kCyclesProposal,  // view histogram, boundaries, cutoffs
  kCyclesAdmit,     // certification pass(es), band, exact recovery
  kCyclesRefine,
  kCyclesFinalize,
};

__device__ __forceinline__ void AddStat(const KernelParams& p, Stat s, unsigned long long v) {
  if (p.stats != nullptr) atomicAdd(&p.stats[s], v);
}

template <int kB>
__device__ __forceinline__ void ClearHist(SharedState<kB>& s) {
  for (uint32_t i = threadIdx.x; i < kCoarseBins; i += kB) s.hist[i] = 0u;
}

template <int kB>
__device__ __noinline__ void FillEmpty(int32_t* out_row, uint32_t k) {
  for (uint32_t i = threadIdx.x; i < k; i += kB) out_row[i] = -1;
}

// The main admission pass at cutoff t: warp segments, then compaction and the
// level-0 histogram of the shared entries (for the candidates' common key
// bits, s.hist_top). On entry s.spill, s.neg_min_key and s.hist are zero (with
// a barrier since); on exit s.count is the admitted count (shared + global)
// and the shared part holds s.warp_count[kWarps] entries.
template <int kB, int kU>
__device__ __forceinline__ void AdmitMain(SharedState<kB>& s, const float* __restrict__ row,
                                          uint32_t L, float t, const Frontier& fa, bool prefetch) {
  AdmitToSegments<kB, kU>(row, L, t, fa, s.warp_count, &s.spill, &s.neg_min_key, &s.nan, prefetch);
  __syncthreads();
  const int top = CommonKeyBits(~s.neg_min_key, Key32(t));
  const uint32_t shared = CompactSegments<kB, PersistentVariant<kB>::kCandidates>(
      fa, s.warp_count, Level0Shift(top), s.hist);
  if (threadIdx.x == 0) s.count = shared + s.spill, s.hist_top = top;
  __syncthreads();
}

// The admitted set as one frontier: the compacted shared part, then the
// global slice (the main pass's spill, then the band's entries).
template <int kB>
__device__ __forceinline__ Frontier AdmittedView(const SharedState<kB>& s, const Frontier& fa) {
  return Frontier{fa.s_idx, fa.s_key, s.warp_count[SharedState<kB>::kWarps],
                  fa.g_idx, fa.g_key, fa.g_cap};
}

// Completes the level-0 histogram of the C admitted values x >= cut and
// returns the common key bits it is built for. Stored: the global entries
// are added (the shared part was counted by CompactSegments), or, when the
// band moved the cut (other common bits), every entry is recounted. Larger
// than its stores: a re-scan of the row, top = 0.
template <int kB>
__device__ __noinline__ int FinishLevel0Hist(SharedState<kB>& s, const float* __restrict__ row,
                                             uint32_t L, float cut, const Frontier& view,
                                             uint32_t C) {
  if (C > view.capacity()) {
    ClearHist(s);
    __syncthreads();
    RescanDigitHist<kB>(row, L, cut, s.hist);
    return 0;
  }
  const int top = CommonKeyBits(~s.neg_min_key, Key32(cut));
  if (top == s.hist_top) {
    FrontierDigitHist<kB>(view, view.s_cap, C, Level0Shift(top), s.hist);
  } else {
    ClearHist(s);
    __syncthreads();
    FrontierDigitHist<kB>(view, 0, C, Level0Shift(top), s.hist);
  }
  return top;
}

// Exact coarse recovery: the coarse bin tau* whose prefix reaches K over the
// whole row gives a cutoff that certifies by construction. Leaves the admitted
// set in fa / s.hist like the sampled pass. Returns the cutoff.
template <int kB, int kU>
__device__ __noinline__ float ExactCandidates(SharedState<kB>& s, const float* __restrict__ row,
                                              uint32_t L, uint32_t k, const Frontier& fa) {
  // Every thread has read the sampled pass's count (the need_exact decision)
  // before thread 0 resets it.
  __syncthreads();
  ClearHist(s);
  if (threadIdx.x == 0) s.count = 0u, s.spill = 0u, s.neg_min_key = 0u;
  __syncthreads();
  CoarseHistPass<kB>(row, L, s.hist, &s.nan);
  const Boundary bd = FindBoundary<kB>(s.hist, kCoarseBins, k, s.scratch);
  if (s.nan) return 0.f;
  if (threadIdx.x < 32) {
    const float t = WarpCoarseCutoff(bd.bin);
    if (threadIdx.x == 0) s.t0 = t;
  }
  ClearHist(s);
  __syncthreads();
  const float cut = s.t0;
  AdmitMain<kB, kU>(s, row, L, cut, fa, false);
  return cut;
}

template <int kB, int kU>
__device__ __noinline__ void SelectRow(SharedState<kB>& s, const DeviceArgs& a,
                                       const KernelParams& p, int64_t r, const Frontier& fa,
                                       const Frontier& fb, uint32_t* out_buf, uint64_t* sort_buf) {
  const uint32_t tid = threadIdx.x;
  const uint32_t k = static_cast<uint32_t>(p.k);
  const float* row = a.layout == static_cast<int32_t>(Layout::kPitched)
                         ? a.scores + r * a.pitch
                         : a.scores + a.row_offsets[r];
  const int64_t length = a.lengths[r];
  int32_t* out_row = a.indices + r * static_cast<int64_t>(k);
  if (length < 0 || length > a.width) {
    FillEmpty<kB>(out_row, k);
    if (tid == 0 && a.row_status) a.row_status[r] = RowStatus::kBadLength;
    return;
  }
  const uint32_t L = static_cast<uint32_t>(length);
  if (tid == 0) s.out_count = 0u, s.nan = 0u, s.count = 0u, s.spill = 0u, s.neg_min_key = 0u;
  ClearHist(s);
  __syncthreads();
  // Phase timers (tid 0's clock after each phase's closing barrier).
  long long clock_mark = clock64();
  auto lap = [&](Stat st) {
    if (tid == 0) {
      const long long now = clock64();
      AddStat(p, st, static_cast<unsigned long long>(now - clock_mark));
      clock_mark = now;
    }
  };
  uint32_t count;
  if (L <= k) {
    unsigned nan = 0;
    for (uint32_t i = tid; i < L; i += kB) {
      out_buf[i] = i;
      nan |= IsNan(row[i]) ? 1u : 0u;
    }
    if (nan) s.nan = 1u;
    __syncthreads();
    count = L;
  } else {
    bool need_exact = true;
    float cut = 0.f;
    if (p.sample_stride > 0 && L >= p.min_sampled_length) {
      const int stride = p.sample_stride;
      // The certification pass's first chunks stream into L2 during the
      // latency-bound proposal.
      if (p.prefetch != 0 && tid == 0) PrefetchRowHead<kB>(row, L);
      SampleHistogram<kB>(row, L, r, stride, p.sample_run == 8 ? 3 : 0, s.hist);
      const uint32_t q0 = static_cast<uint32_t>(ProposalQuota(p.k, stride));
      const uint32_t q1 = static_cast<uint32_t>(RescueQuota(p.k, stride));
      Boundary b0, b1;
      FindBoundaries<kB>(s.hist, kCoarseBins, q0, q1, s.scratch, &b0, &b1);
      if (b0.total >= q1) {
        if (tid < 64) {
          const float t = WarpCoarseCutoff(tid < 32 ? b0.bin : b1.bin);
          if (tid == 0) s.t0 = t, AddStat(p, kSampled, 1);
          if (tid == 32) s.t1 = t;
        }
        ClearHist(s);
        __syncthreads();
        lap(kCyclesProposal);
        const float t0 = s.t0, t1 = s.t1;
        AdmitMain<kB, kU>(s, row, L, t0, fa, p.prefetch != 0);
        // The band pass below adds to s.count and may set s.nan: every warp
        // reads both before any warp can take that branch, so the whole CTA
        // takes the same branch and reaches the same barriers.
        const uint32_t admitted = s.count;
        const bool main_nan = s.nan != 0u;
        __syncthreads();
        if (!main_nan) {
          if (admitted >= k) {
            need_exact = false;
            cut = t0;
            if (tid == 0) AddStat(p, kCertified, 1);
          } else if (b1.bin > b0.bin) {
            // Underfill: append the band t1 <= x < t0 and re-certify.
            AdmitPass<kB, true, false, kU>(row, L, t1, t0, AdmittedView(s, fa), &s.count,
                                           &s.neg_min_key, &s.nan, false);
            __syncthreads();
            if (s.count >= k) {
              need_exact = false;
              cut = t1;
              if (tid == 0) AddStat(p, kBandRescued, 1);
            }
          }
          if (need_exact && tid == 0) AddStat(p, kExactRecovery, 1);
        }
      }
    }
    if (need_exact && !s.nan) {
      if (tid == 0) AddStat(p, kExactRows, 1);
      cut = ExactCandidates<kB, kU>(s, row, L, k, fa);
    }
    lap(kCyclesAdmit);
    if (!s.nan) {
      const uint32_t C = s.count;
      const Frontier view = AdmittedView(s, fa);
      const int top = FinishLevel0Hist(s, row, L, cut, view, C);
      const uint32_t rescans = Refine(s, row, L, cut, C, view, fb, k, p.deterministic != 0, top,
                                      RefineOut{out_buf, &s.out_count});
      if (tid == 0) {
        AddStat(p, kRows, 1);
        AddStat(p, kCands, C);
        if (rescans) AddStat(p, kRescans, rescans);
      }
    }
    __syncthreads();
    count = s.out_count;
    lap(kCyclesRefine);
  }
  if (s.nan) {
    FillEmpty<kB>(out_row, k);
    if (tid == 0 && a.row_status) a.row_status[r] = RowStatus::kNan;
  } else {
    FinalizeRow<kB>(row, out_buf, count, out_row, k, p.sorted != 0, p.deterministic != 0, sort_buf);
    if (tid == 0 && a.row_status) a.row_status[r] = RowStatus::kOk;
  }
  __syncthreads();
  lap(kCyclesFinalize);
}

// The shared frontiers and the output buffers of the variant of kB threads:
// A and B in the arena after the state, overflowing to the CTA's slice; the
// committed indices and the sort in shared memory for K up to the variant's
// output capacity, in the slice above it.
template <int kB>
struct CtaStores {
  Frontier fa, fb;
  uint32_t* out_buf;
  uint64_t* sort_buf;
};
template <int kB>
__device__ __forceinline__ CtaStores<kB> MakeCtaStores(SharedState<kB>& s, const KernelParams& p) {
  using V = PersistentVariant<kB>;
  const uint32_t g = static_cast<uint32_t>(p.slice_entries);
  uint32_t* slice = reinterpret_cast<uint32_t*>(p.cta_slices + blockIdx.x * p.cta_slice_bytes);
  uint32_t* arena = FrontierArena(s);
  constexpr uint32_t ca = V::kCandidates, cb = V::kFrontier;
  CtaStores<kB> c{
      Frontier{arena, arena + ca, ca, slice, slice + g, g},
      Frontier{arena + 2 * ca, arena + 2 * ca + cb, cb, slice + 2 * g, slice + 3 * g, g}, s.out,
      reinterpret_cast<uint64_t*>(arena)};
  if (p.k > V::kOutput) {
    c.out_buf = slice + 4 * g;
    c.sort_buf = reinterpret_cast<uint64_t*>(slice + 4 * g + ((p.k + 1) & ~1));
  }
  return c;
}

// 4 float4 loads in flight per thread in the certification pass in both
// variants: both run 1024 threads per SM at 64 registers.
inline constexpr int kAdmitUnroll = 4;

// Persistent schedule: the first wave takes rows by block id, later rows are
// claimed from counters[0] (block-uniform result, one claim per CTA).
template <int kB>
__device__ __forceinline__ int64_t ClaimNextRow(SharedState<kB>& s, const KernelParams& p) {
  if (threadIdx.x == 0) s.next_row = gridDim.x + atomicAdd(&p.counters[0], 1u);
  __syncthreads();
  const int64_t r = s.next_row;
  __syncthreads();
  return r;
}

// Called once per CTA after its last claim: the last CTA to finish restores
// the counters for the next launch (graph replays without a host round trip).
__device__ __forceinline__ void RestoreRowCounters(const KernelParams& p) {
  if (threadIdx.x == 0) {
    __threadfence();
    const uint32_t done = atomicAdd(&p.counters[1], 1u);
    if (done == gridDim.x - 1) {
      atomicExch(&p.counters[0], 0u);
      atomicExch(&p.counters[1], 0u);
    }
  }
}

template <int kB>
__global__ void __launch_bounds__(kB, PersistentVariant<kB>::kMinBlocks)
    PersistentSelectKernel(const DeviceArgs args_in, const DeviceArgs* __restrict__ dev_args,
                           const KernelParams p) {
  extern __shared__ uint4 smem_raw[];
  SharedState<kB>& s = *reinterpret_cast<SharedState<kB>*>(smem_raw);
  const DeviceArgs a = dev_args != nullptr ? *dev_args : args_in;
  const CtaStores<kB> c = MakeCtaStores(s, p);
  const Frontier& fa = c.fa;
  const Frontier& fb = c.fb;
  uint32_t* out_buf = c.out_buf;
  uint64_t* sort_buf = c.sort_buf;
  int64_t r = blockIdx.x;
  while (r < a.num_rows) {
    SelectRow<kB, kAdmitUnroll>(s, a, p, r, fa, fb, out_buf, sort_buf);
    r = ClaimNextRow(s, p);
  }
  RestoreRowCounters(p);
}

// Register-resident direct-exact (DESIGN section 3): the row of
// K < L <= kRegisterRowCap is read from DRAM once, into registers
// (LoadRowToRegisters); the coarse histogram, the frontier's key range and
// the classification (commit coarse < tau*, frontier coarse == tau*) are
// passes over registers. The frontier (at most L <= kRegisterRowCap entries)
// always fits both stores (A, B: shared + slice >= 20480 entries), so Refine
// never re-scans the row: a re-scan would re-admit the committed values,
// which is why the route passes Refine the frontier's own key range and
// quota K - committed. Deterministic ties: every committed value outranks
// every frontier value (coarse is monotone in key32), and Refine resolves
// the frontier by (key, index) like the persistent kernel's exact route.
template <int kB>
__device__ __noinline__ void RegisterSelectRow(SharedState<kB>& s, const DeviceArgs& a,
                                               const KernelParams& p, int64_t r,
                                               const CtaStores<kB>& c) {
  const uint32_t tid = threadIdx.x;
  const uint32_t k = static_cast<uint32_t>(p.k);
  // Row pointer, length and the stores are re-derived after the register
  // passes (cheap loads) rather than kept live across them: the 36 floats of
  // the row take most of the 64 registers.
  auto row_of = [&]() {
    return a.layout == static_cast<int32_t>(Layout::kPitched) ? a.scores + r * a.pitch
                                                              : a.scores + a.row_offsets[r];
  };
  if (tid == 0) {
    s.out_count = 0u, s.nan = 0u, s.count = 0u, s.neg_min_key = 0u, s.max_key = 0u;
  }
  ClearHist(s);
  RegisterRow rr;
  LoadRowToRegisters<kB>(row_of(), static_cast<uint32_t>(a.lengths[r]), rr);
  __syncthreads();
  RegisterCoarseHist<kB>(rr, s.hist, &s.nan);
  // Synchronises on entry and exit: s.nan and the histogram are complete;
  // s.scratch keeps tau* (bin), the committed count (below) and the frontier
  // size (in_bin) until Refine's first boundary search.
  const uint32_t tau = FindBoundary<kB>(s.hist, kCoarseBins, k, s.scratch).bin;
  if (s.nan) {
    FillEmpty<kB>(a.indices + r * static_cast<int64_t>(k), k);
    if (tid == 0 && a.row_status) a.row_status[r] = RowStatus::kNan;
    __syncthreads();
    return;
  }
  if (s.scratch.in_bin > c.fa.capacity() || s.scratch.in_bin > c.fb.capacity()) {
    // Not reachable with the planner's slice sizes (frontier <= L <= 16384
    // < 20480); kept so that a smaller slice stays exact: the two-pass route
    // re-reads the row.
    __syncthreads();
    SelectRow<kB, kAdmitUnroll>(s, a, p, r, c.fa, c.fb, c.out_buf, c.sort_buf);
    return;
  }
  ClearHist(s);
  OpaqueRegisters(rr);
  RegisterFrontierKeyRange<kB>(rr, tau, &s.neg_min_key, &s.max_key);
  __syncthreads();
  const int top = CommonKeyBits(~s.neg_min_key, s.max_key);
  OpaqueRegisters(rr);
  RegisterCommit<kB>(rr, tau, s.out, &s.out_count);
  OpaqueRegisters(rr);
  RegisterFrontier<kB>(rr, tau, Level0Shift(top), c.fa, &s.count, s.hist);
  __syncthreads();
  long long clock_mark = clock64();
  const uint32_t C = s.scratch.in_bin;
  const uint32_t quota = k - s.scratch.below;
  const float* row = row_of();
  const uint32_t L = static_cast<uint32_t>(a.lengths[r]);
  // The frontier's smallest value stands in for the cut: Refine only takes
  // the shared key prefix from it (no re-scan, see above).
  const float cut = BitsToFloat(BitsOfDescendingKey(s.max_key));
  const uint32_t rescans = Refine(s, row, L, cut, C, c.fa, c.fb, quota, p.deterministic != 0, top,
                                  RefineOut{s.out, &s.out_count});
  __syncthreads();
  const uint32_t count = s.out_count;
  if (tid == 0) {
    AddStat(p, kRows, 1);
    AddStat(p, kExactRows, 1);
    AddStat(p, kCands, C);
    if (rescans) AddStat(p, kRescans, rescans);
    const long long now = clock64();
    AddStat(p, kCyclesRefine, static_cast<unsigned long long>(now - clock_mark));
    clock_mark = now;
  }
  FinalizeRow<kB>(row, s.out, count, a.indices + r * static_cast<int64_t>(k), k, p.sorted != 0,
                  p.deterministic != 0, c.sort_buf);
  if (tid == 0 && a.row_status) a.row_status[r] = RowStatus::kOk;
  __syncthreads();
  if (tid == 0) {
    AddStat(p, kCyclesFinalize, static_cast<unsigned long long>(clock64() - clock_mark));
  }
}

// The register route's kernel: the persistent schedule (first wave by block
// id, then a claim counter the last CTA resets) over the 512-thread
// variant's shared state and slices. Rows the registers do not hold
// (L > kRegisterRowCap), L <= K and bad lengths go to SelectRow.
// One CTA per SM (128 registers): at 64 registers (2 CTAs/SM) the row's 36
// floats plus the passes' temporaries spilled 268 bytes per thread per row
// (ptxas -warn-spills), which would stream through L2 on every row.
inline constexpr int kRegisterExactMinBlocks = 1;
__global__ void __launch_bounds__(kThreads, kRegisterExactMinBlocks)
    RegisterExactKernel(const DeviceArgs args_in, const DeviceArgs* __restrict__ dev_args,
                        const KernelParams p) {
  constexpr int kB = kThreads;
  extern __shared__ uint4 smem_raw[];
  SharedState<kB>& s = *reinterpret_cast<SharedState<kB>*>(smem_raw);
  const DeviceArgs a = dev_args != nullptr ? *dev_args : args_in;
  const CtaStores<kB> c = MakeCtaStores(s, p);
  int64_t r = blockIdx.x;
  while (r < a.num_rows) {
    const int64_t length = a.lengths[r];
    if (length > p.k && length <= kRegisterRowCap && length <= a.width) {
      RegisterSelectRow<kB>(s, a, p, r, c);
    } else {
      SelectRow<kB, kAdmitUnroll>(s, a, p, r, c.fa, c.fb, c.out_buf, c.sort_buf);
    }
    r = ClaimNextRow(s, p);
  }
  RestoreRowCounters(p);
}

// Sampled KV-split (DESIGN section 3): `split` CTAs per row. Every segment
// CTA rebuilds the same view and cutoff from the row id, certifies its
// contiguous segment into the row's shared candidate buffer (global count),
// and the last to arrive
// (row-local arrival counter) builds the level-0 histogram from the row's
// candidate buffer and refines it like the one-CTA path.
// Rows the split cannot serve (short, unusable view, underfill, NaN) fall back
// to SelectRow on one CTA, which is exact on its own. Always the 512-thread
// variant (few rows: nothing to overlap across CTAs of one SM).
__global__ void __launch_bounds__(kThreads, PersistentVariant<kThreads>::kMinBlocks)
    KvSplitKernel(const DeviceArgs args_in, const DeviceArgs* __restrict__ dev_args,
                  const KernelParams p) {
  constexpr int kB = kThreads;
  constexpr int kU = kAdmitUnroll;
  extern __shared__ uint4 smem_raw[];
  SharedState<kB>& s = *reinterpret_cast<SharedState<kB>*>(smem_raw);
  const DeviceArgs a = dev_args != nullptr ? *dev_args : args_in;
  const int64_t r = blockIdx.x / p.split;
  const int seg = static_cast<int>(blockIdx.x % p.split);
  if (r >= a.num_rows) return;
  const uint32_t tid = threadIdx.x;
  const uint32_t k = static_cast<uint32_t>(p.k);
  const CtaStores<kB> c = MakeCtaStores(s, p);
  const Frontier& fa = c.fa;
  const Frontier& fb = c.fb;
  uint32_t* out_buf = c.out_buf;
  uint64_t* sort_buf = c.sort_buf;
  const int64_t length = a.lengths[r];
  if (length < 0 || length > a.width || length <= p.k || length < p.min_sampled_length) {
    if (seg == 0) SelectRow<kB, kU>(s, a, p, r, fa, fb, out_buf, sort_buf);
    return;
  }
  const uint32_t L = static_cast<uint32_t>(length);
  const float* row = a.layout == static_cast<int32_t>(Layout::kPitched)
                         ? a.scores + r * a.pitch
                         : a.scores + a.row_offsets[r];
  auto* headers = reinterpret_cast<RowHeader*>(p.row_state);
  auto* bufs = reinterpret_cast<uint32_t*>(p.row_state + RowStateZeroBytes(p.max_rows));
  RowHeader& rh = headers[r];
  const uint32_t ge = static_cast<uint32_t>(p.row_entries);
  uint32_t* row_buf = bufs + r * 2 * p.row_entries;
  const Frontier shared_front{nullptr, nullptr, 0, row_buf, row_buf + ge, ge};

  // Proposal: identical in every segment CTA.
  ClearHist(s);
  if (tid == 0) s.count = 0u, s.nan = 0u, s.out_count = 0u;
  __syncthreads();
  const int stride = p.sample_stride;
  SampleHistogram<kB>(row, L, r, stride, p.sample_run == 8 ? 3 : 0, s.hist);
  const uint32_t q0 = static_cast<uint32_t>(ProposalQuota(p.k, stride));
  const uint32_t q1 = static_cast<uint32_t>(RescueQuota(p.k, stride));
  const Boundary b0 = FindBoundary<kB>(s.hist, kCoarseBins, q0, s.scratch);
  if (b0.total < q1) {
    if (seg == 0) SelectRow<kB, kU>(s, a, p, r, fa, fb, out_buf, sort_buf);
    return;
  }
  if (tid < 32) {
    const float t = WarpCoarseCutoff(b0.bin);
    if (tid == 0) s.t0 = t;
  }
  ClearHist(s);
  __syncthreads();
  const float t0 = s.t0;
  const uint64_t chunk = ((static_cast<uint64_t>(L) + p.split - 1) / p.split + 3u) & ~uint64_t{3};
  const uint32_t beg = static_cast<uint32_t>(min(static_cast<uint64_t>(L), seg * chunk));
  const uint32_t end = static_cast<uint32_t>(min(static_cast<uint64_t>(L), beg + chunk));
  if (beg < end) {
    AdmitPass<kB, false, true, kU>(row + beg, end - beg, t0, 0.f, shared_front, &rh.count,
                                   &rh.neg_min_key, &rh.nan, p.prefetch != 0, beg);
  }
  __threadfence();
  __syncthreads();
  if (tid == 0) s.next_row = atomicAdd(&rh.arrival, 1u);
  __syncthreads();
  if (s.next_row != static_cast<long long>(p.split - 1)) return;
  // Finisher: every segment's candidates, count and histogram are visible.
  __threadfence();
  int32_t* out_row = a.indices + r * static_cast<int64_t>(k);
  const uint32_t C = __ldcg(&rh.count);
  if (__ldcg(&rh.nan) != 0u) {
    FillEmpty<kB>(out_row, k);
    if (tid == 0 && a.row_status) a.row_status[r] = RowStatus::kNan;
    return;
  }
  if (C < k) {  // underfill: the one-CTA path (band, exact recovery) on this row
    SelectRow<kB, kU>(s, a, p, r, fa, fb, out_buf, sort_buf);
    return;
  }
  // s.hist is still zero (cleared before the segment pass): the level-0
  // histogram of every segment's candidates.
  int top = 0;
  if (C <= shared_front.capacity()) {
    top = CommonKeyBits(~__ldcg(&rh.neg_min_key), Key32(t0));
    FrontierDigitHist<kB>(shared_front, 0, C, Level0Shift(top), s.hist);
  } else {
    RescanDigitHist<kB>(row, L, t0, s.hist);
  }
  if (tid == 0) {
    s.out_count = 0u;
    AddStat(p, kSampled, 1);
    AddStat(p, kCertified, 1);
  }
  __syncthreads();
  const uint32_t rescans = Refine(s, row, L, t0, C, shared_front, fb, k, p.deterministic != 0, top,
                                  RefineOut{out_buf, &s.out_count});
  __syncthreads();
  const uint32_t count = s.out_count;
  FinalizeRow<kB>(row, out_buf, count, out_row, k, p.sorted != 0, p.deterministic != 0, sort_buf);
  if (tid == 0) {
    if (a.row_status) a.row_status[r] = RowStatus::kOk;
    AddStat(p, kRows, 1);
    AddStat(p, kCands, C);
    if (rescans) AddStat(p, kRescans, rescans);
  }
}

// Verification of a selection on the device: per row, indices distinct and in
// range (block sort), and the count of valid values strictly greater than the
// minimum selected value equal to the count of selected values above it.
__global__ void __launch_bounds__(kThreads)
    VerifyKernel(const DeviceArgs a, int32_t k, unsigned long long* bad_rows, int* first_bad) {
  extern __shared__ uint4 smem_raw[];
  uint64_t* keys = reinterpret_cast<uint64_t*>(smem_raw);
  __shared__ unsigned bad;
  __shared__ unsigned gt_sel, gt_row;
  const int64_t r = blockIdx.x;
  const float* row = a.layout == 0 ? a.scores + r * a.pitch : a.scores + a.row_offsets[r];
  const int64_t L = a.lengths[r];
  const int32_t* out = a.indices + r * static_cast<int64_t>(k);
  const uint32_t want = static_cast<uint32_t>(L < k ? L : k);
  uint32_t n = 1;
  while (n < static_cast<uint32_t>(k)) n <<= 1;
  if (threadIdx.x == 0) bad = 0, gt_sel = 0, gt_row = 0;
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < n; i += kThreads) {
    uint64_t v = ~0ull;
    if (i < static_cast<uint32_t>(k)) {
      const int32_t idx = out[i];
      if (i < want) {
        if (idx < 0 || idx >= L) {
          bad = 1;
        } else {
          v = static_cast<uint32_t>(idx);
        }
      } else if (idx != -1) {
        bad = 1;
      }
    }
    keys[i] = v;
  }
  __syncthreads();
  BlockBitonicSort<kThreads>(keys, n);
  for (uint32_t i = threadIdx.x + 1; i < want; i += kThreads) {
    if (keys[i] == keys[i - 1]) bad = 1;
  }
  // Minimum selected key (descending key: the maximum key32).
  __shared__ unsigned max_key;
  if (threadIdx.x == 0) max_key = 0;
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < want; i += kThreads) {
    if (keys[i] != ~0ull) atomicMax(&max_key, Key32(row[keys[i]]));
  }
  __syncthreads();
  const unsigned kmin = max_key;
  unsigned c_sel = 0, c_row = 0;
  for (uint32_t i = threadIdx.x; i < want; i += kThreads) {
    if (keys[i] != ~0ull && Key32(row[keys[i]]) < kmin) ++c_sel;
  }
  if (want == static_cast<uint32_t>(k) && L > k) {
    for (int64_t i = threadIdx.x; i < L; i += kThreads) c_row += Key32(row[i]) < kmin ? 1u : 0u;
  }
  atomicAdd(&gt_sel, c_sel);
  atomicAdd(&gt_row, c_row);
  __syncthreads();
  if (threadIdx.x == 0) {
    if (L > k && gt_row != gt_sel) bad = 1;
    if (bad) {
      atomicAdd(bad_rows, 1ull);
      atomicMin(first_bad, static_cast<int>(r));
    }
  }
}

template <int kB>
constexpr size_t VariantSharedBytes() {
  using V = PersistentVariant<kB>;
  return sizeof(SharedState<kB>) + 8u * static_cast<size_t>(V::kCandidates + V::kFrontier);
}
// Four small CTAs must fit an SM's 228 KiB (1 KiB of it reserved per CTA).
static_assert(VariantSharedBytes<kSmallThreads>() <= 56u * 1024u, "4 CTAs per SM");
static_assert(VariantSharedBytes<kThreads>() <= 112u * 1024u, "2 CTAs per SM");
// The output sort's keys reuse the frontier arena.
static_assert(8u * kSmallMaxK <= 8u * (kSmallCandidates + kSmallFrontier), "sort in the arena");

}  // namespace

size_t PersistentSharedBytes(int block) {
  return block == kSmallThreads ? VariantSharedBytes<kSmallThreads>()
                                : VariantSharedBytes<kThreads>();
}

cudaError_t ConfigurePersistentKernel() {
  cudaError_t e = cudaFuncSetAttribute(PersistentSelectKernel<kThreads>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(PersistentSharedBytes(kThreads)));
  if (e == cudaSuccess) {
    e = cudaFuncSetAttribute(PersistentSelectKernel<kSmallThreads>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(PersistentSharedBytes(kSmallThreads)));
  }
  if (e == cudaSuccess) {
    e = cudaFuncSetAttribute(RegisterExactKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(PersistentSharedBytes(kThreads)));
  }
  if (e == cudaSuccess) {
    e = cudaFuncSetAttribute(KvSplitKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(PersistentSharedBytes(kThreads)));
  }
  if (e != cudaSuccess) return e;
  return cudaFuncSetAttribute(VerifyKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(8 * 8192));
}

cudaError_t PersistentOccupancy(int block, int* ctas_per_sm) {
  if (block == kSmallThreads) {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        ctas_per_sm, PersistentSelectKernel<kSmallThreads>, kSmallThreads,
        PersistentSharedBytes(kSmallThreads));
  }
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      ctas_per_sm, PersistentSelectKernel<kThreads>, kThreads, PersistentSharedBytes(kThreads));
}

cudaError_t LaunchPersistent(const DeviceArgs& args, const DeviceArgs* dev_args,
                             const KernelParams& params, int grid, cudaStream_t stream) {
  // The small variant stages at most kSmallMaxK outputs in shared memory and
  // its slice has no staging area (the planner never pairs them).
  if (params.block == kSmallThreads && params.k > kSmallMaxK) return cudaErrorInvalidValue;
  cudaError_t e = cudaMemsetAsync(params.counters, 0, 2 * sizeof(uint32_t), stream);
  if (e != cudaSuccess) return e;
  const size_t smem = PersistentSharedBytes(params.block);
  if (params.block == kSmallThreads) {
    PersistentSelectKernel<kSmallThreads>
        <<<grid, kSmallThreads, smem, stream>>>(args, dev_args, params);
  } else {
    PersistentSelectKernel<kThreads><<<grid, kThreads, smem, stream>>>(args, dev_args, params);
  }
  return cudaGetLastError();
}

cudaError_t RegisterExactOccupancy(int* ctas_per_sm) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(ctas_per_sm, RegisterExactKernel, kThreads,
                                                       PersistentSharedBytes(kThreads));
}

cudaError_t LaunchRegisterExact(const DeviceArgs& args, const DeviceArgs* dev_args,
                                const KernelParams& params, int grid, cudaStream_t stream) {
  // The shared output holds K <= kSmemOutput; larger K take the general route.
  if (params.k > kSmemOutput) return cudaErrorInvalidValue;
  cudaError_t e = cudaMemsetAsync(params.counters, 0, 2 * sizeof(uint32_t), stream);
  if (e != cudaSuccess) return e;
  RegisterExactKernel<<<grid, kThreads, PersistentSharedBytes(kThreads), stream>>>(args, dev_args,
                                                                                   params);
  return cudaGetLastError();
}

cudaError_t LaunchKvSplit(const DeviceArgs& args, const DeviceArgs* dev_args,
                          const KernelParams& params, int grid, cudaStream_t stream) {
  // The row claim counters are unused here but zeroed too: every launch
  // leaves them 0 (the workspace contract the tests check).
  cudaError_t e = cudaMemsetAsync(params.counters, 0, 2 * sizeof(uint32_t), stream);
  if (e != cudaSuccess) return e;
  e = cudaMemsetAsync(params.row_state, 0, RowStateZeroBytes(params.max_rows), stream);
  if (e != cudaSuccess) return e;
  const size_t smem = PersistentSharedBytes(kThreads);
  KvSplitKernel<<<grid, kThreads, smem, stream>>>(args, dev_args, params);
  return cudaGetLastError();
}

cudaError_t LaunchVerify(const DeviceArgs& args, int32_t k, int64_t num_rows,
                         unsigned long long* bad_rows, int* first_bad, cudaStream_t stream) {
  if (num_rows == 0) return cudaSuccess;
  uint32_t n = 1;
  while (n < static_cast<uint32_t>(k)) n <<= 1;
  if (n > 8192) return cudaErrorInvalidValue;
  VerifyKernel<<<static_cast<unsigned>(num_rows), kThreads, 8 * n, stream>>>(args, k, bad_rows,
                                                                             first_bad);
  return cudaGetLastError();
}

}  // namespace topk::cuda
