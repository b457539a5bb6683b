// The resident decode route (docs/design.md section 3): decode batches of a
// few rows, one launch, one thread-block cluster per row, the row read from
// global memory once and kept on chip. Per row:
//   1. every rank loads its segment into shared memory as keys and counts the
//      segment's exact coarse histogram in the same pass (LoadResidentSegment);
//   2. the histograms are all-reduced through distributed shared memory
//      (ExchangeResidentHistograms; a lone rank, a row a CTA, has none and
//      takes the CTA's barriers): every rank finds the same boundary bin b,
//      the K-th value's, and its cutoff CoarseCutoff(b). The count is exact by
//      construction: nothing to certify, no fallback pass;
//   2b. the bin b is the frontier and every value above it is committed; only
//      when b exceeds rank 0's store it is split once more on chip
//      (resident_frontier.cuh): the digit holding the K-th value becomes the
//      frontier and the values above it are committed too;
//   3. every rank writes its committed indices straight into the output row
//      (into rank 0's staging when the row is sorted or deterministic). A
//      boundary bin of at most kResidentCandidates entries (the usual case)
//      is sent to every rank (resident_candidates.cuh); a larger frontier
//      goes to rank 0 with its level-0 digits (GatherToLeader), the keys
//      read from shared memory;
//   4. the small bin: after one cluster barrier each rank ranks its own
//      entries among the bin's by (key, index) and writes those that make
//      the K. The large one: rank 0 refines it to the K values left (Refine)
//      and writes the row, while the other ranks go on to the cluster's
//      next row.
// A frontier that still exceeds rank 0's store (a flood of equal values) is
// refined by re-scanning the row for the values in its band, still exact. Rows of L <= K, bad
// lengths and NaN rows are answered by rank 0 alone. Clusters take rows in turn (row = cluster id,
// + clusters, ...). The kernel comes in two CTA sizes (planner::kResident: 512 threads for few
// rows, 1024 for the band of many), the same steps.
#include <cooperative_groups.h>

#include "key_levels.cuh"
#include "refinement.cuh"
#include "resident_candidates.cuh"
#include "resident_exchange.cuh"
#include "resident_frontier.cuh"
#include "resident_gather.cuh"
#include "resident_load.cuh"
#include "resident_state.cuh"
#include "routes.h"
#include "row_scope.cuh"
#include "score_row.cuh"

namespace topk::cuda {
namespace {

namespace cg = cooperative_groups;

// The row of L <= K values on rank 0 alone: the whole row, or no answer.
template <int kB, typename Row>
__device__ __forceinline__ void AnswerWholeRow(SharedState<kB>& s, const RowScope& scope,
                                               const Row& row, uint32_t L, uint64_t* sort_buf) {
  if (threadIdx.x == 0) s.nan = 0u;
  __syncthreads();
  TakeWholeRow<kB>(row, L, s.out, &s.nan);
  int32_t* out_row = scope.Out();
  if (s.nan) {
    scope.Fail<kB>(out_row, RowStatus::kNan);
  } else {
    scope.Finalize<kB>(row, s.out, L, out_row, sort_buf);
    scope.Status(RowStatus::kOk);
  }
  __syncthreads();
}

template <typename Row, int kB>
__global__ void __launch_bounds__(kB, planner::kResident.min_blocks)
    ResidentDecodeKernel(const DeviceArgs args_in, const DeviceArgs* __restrict__ dev_args,
                         const __grid_constant__ KernelParams p) {
#if TOPK_HAS_CLUSTERS
  extern __shared__ uint4 smem_raw[];
  SharedState<kB>& s = *reinterpret_cast<SharedState<kB>*>(smem_raw);
  const ResidentRank mine = MakeResidentRank<kB>(s);
  cg::cluster_group cluster = cg::this_cluster();
  const uint32_t ranks = cluster.num_blocks();
  const uint32_t me = cluster.block_rank();
  const uint32_t tid = threadIdx.x;
  const uint32_t k = static_cast<uint32_t>(p.k);
  if (tid == 0) s.args = dev_args != nullptr ? *dev_args : args_in;
  // The persistent route's row counters are unused here; every launch still
  // leaves them 0 (the workspace contract), without a memset node.
  if (blockIdx.x == 0 && tid == 0) p.counters[0] = 0u, p.counters[1] = 0u;
  __syncthreads();
  const DeviceArgs& a = s.args;
  // A cluster of one rank (a row a CTA: the band of many rows) has no
  // exchange, and its barriers are the CTA's; its "remote" stores are local.
  // Only the band's 1024-thread CTA takes it (the planner gives a row a CTA
  // of its own only from 67 rows): the 512-thread kernel of few rows keeps
  // its pointers known at compile time (a run-time choice cost its steps
  // 1-2 %, bench/NOTES.md, "sixth round").
  const bool alone = kB == kResidentWideThreads && ranks == 1;
  auto on_lead = [&](auto* local) { return alone ? local : cluster.map_shared_rank(local, 0); };
  auto row_sync = [&] {
    if (alone) {
      __syncthreads();
    } else {
      cluster.sync();
    }
  };
  const Frontier lead_a = ResidentFrontierA(mine.frontier_a);
  const Frontier to_lead = ResidentFrontierA(on_lead(mine.frontier_a));
  uint32_t* lead_count = &on_lead(mine.counts)->gathered;
  uint32_t* lead_out = on_lead(s.out);
  uint32_t* lead_out_count = on_lead(&s.out_count);
  uint32_t* lead_hist = on_lead(s.hist);
  // The row's coarse histogram and NaN flag: the exchange's totals, or a
  // lone rank's own counts.
  const uint32_t* const row_hist = alone ? mine.view_hist : mine.total_hist;
  const uint32_t* const row_nan = alone ? &mine.counts->nan : &mine.totals->nan;
  uint64_t* sort_buf = reinterpret_cast<uint64_t*>(mine.frontier_a);
  const uint32_t slice_keys = static_cast<uint32_t>(p.resident_slice_keys);

  for (int64_t r = blockIdx.x / ranks; r < a.num_rows; r += gridDim.x / ranks) {
    const RowScope scope{a, p, r, k};
    const long long row_start = clock64();
    // The length's global read is in flight while the histograms are
    // cleared (rows answered whole clear them too, harmlessly).
    const int64_t length = a.lengths[r];
    for (uint32_t i = tid; i < kCoarseBins; i += kB) {
      mine.view_hist[i] = 0u, mine.total_hist[i] = 0u, s.hist[i] = 0u;
    }
    if (tid == 0) *mine.counts = ResidentCounts{}, s.out_count = 0u;
    const Row row = RowOf<Row>(a, p, r);
    __syncthreads();
    if (length < 0 || length > a.width || length <= p.k) {
      if (me != 0) continue;
      if (!scope.FailBadLength<kB>(length)) {
        AnswerWholeRow<kB>(s, scope, row, static_cast<uint32_t>(length), sort_buf);
      }
      continue;
    }
    long long clock_mark = row_start;
    const PhaseClock clock{p, clock_mark};
    auto lap = [&](Stat st) {
      if (me == 0) clock.Lap(st);
    };
    // The steps within the phases (route_stats.h), on their own mark.
    long long step_mark = clock_mark;
    const PhaseClock step_clock{p, step_mark};
    auto step = [&](Stat st) {
      if (me == 0) step_clock.Lap(st);
    };
    if (me == 0 && tid == 0 && p.row_trace != nullptr) TraceStamp(scope.Trace(), kTraceStart);
    const uint32_t L = static_cast<uint32_t>(length);
    // The rank's segment: consecutive equal parts of the row (the slice
    // holds ceil(N_cap / ranks) keys, and L <= N_cap).
    const uint32_t chunk = (L + ranks - 1) / ranks;
    const uint32_t beg = min(L, me * chunk);
    const uint32_t len = min(L, beg + chunk) - beg;
    if (chunk > slice_keys) __trap();  // the planner sized the slice for N_cap
    // 1. The one read: keys and the exact coarse histogram.
    // The segment's keys start `skew` words into the slice, so that the
    // 16-byte groups of its body land on 16-byte boundaries of shared memory.
    const uint32_t skew = (4u - HeadElements(row.From(beg), len) % 4u) % 4u;
    uint32_t* const keys = mine.keys + skew;
    if (len > 0) LoadResidentSegment<kB>(row.From(beg), len, keys, mine.view_hist, mine.counts);
    if (p.stats != nullptr) __syncthreads();  // the step timers' view: the whole CTA's
    step(Stat::kCyclesResidentLoad);
    row_sync();
    step(Stat::kCyclesResidentLoadWait);
    // 2. The row's histogram and its NaN flag on every rank.
    if (!alone) {
      ExchangeResidentHistograms<kB>(mine.view_hist, mine.total_hist, mine.counts, mine.totals);
      cluster.sync();
    }
    step(Stat::kCyclesResidentExchange);
    if (*row_nan) {
      if (me == 0) {
        scope.Fail<kB>(scope.Out(), RowStatus::kNan);
        __syncthreads();
      }
      continue;
    }
    const Boundary bd = FindBoundary<kB>(row_hist, kCoarseBins, k, s.scratch);
    // The bin's cutoff and the one above it (the bin's first key, for the
    // split below), in closed form in every thread: no search, no barrier.
    const uint32_t cut_key = Key32(CoarseCutoffClosedForm(bd.bin));
    const uint32_t first = BinFirstKey(bd.bin, CoarseCutoffClosedForm(bd.bin - 1u));
    // Unsorted rows with any K values among ties: every rank writes its
    // committed indices straight into the output row; sorted and
    // deterministic rows stage all K in rank 0 for the output's sort.
    const bool direct = p.sorted == 0 && p.deterministic == 0;
    int32_t* out_row = scope.Out();
    uint32_t* const commits = direct ? reinterpret_cast<uint32_t*>(out_row) : lead_out;
    uint32_t candidates = bd.in_bin, rescans = 0;
    if (bd.in_bin <= kResidentCandidates) {
      lap(Stat::kCyclesProposal);
      step(Stat::kCyclesResidentBoundary);
      // 3. The committed indices out, the bin's entries to every rank.
      uint64_t* list = reinterpret_cast<uint64_t*>(mine.frontier_a);
      if (tid < 32) CandidateOffset(mine.view_hist, bd.bin, &mine.counts->list_offset);
      ShareResidentCandidates<kB>(keys, len, beg, first, cut_key, commits, lead_out_count, list,
                                  &mine.counts->list_offset, mine.totals->gather);
      if (p.stats != nullptr) __syncthreads();
      step(Stat::kCyclesResidentGather);
      row_sync();
      step(Stat::kCyclesResidentGatherWait);
      lap(Stat::kCyclesAdmit);
      // 4. Each rank's entries of the bin ranked among all: the K - below
      // smallest take the slots after the committed ones.
      CommitResidentCandidates<kB>(list, bd.in_bin, mine.counts->list_offset,
                                   mine.view_hist[bd.bin], k - bd.below, commits, bd.below);
      // Rank 0's staging holds all K once every rank has written into it.
      if (!direct) row_sync();
      if (me != 0) continue;
      if (tid == 0) s.out_count = k;
      __syncthreads();
    } else {
      ResidentFrontier f;
      if (bd.in_bin <= kResidentFrontierA) {
        // The bin is the frontier; every value above it is committed.
        f = MakeResidentFrontier(first, cut_key, bd.below, bd.in_bin);
      } else {
        // 2b. Split the boundary bin on chip: its digits' histogram,
        // exchanged; the digit of the K-th value is the frontier.
        const int shift = BinDigitShift(first, cut_key);
        for (uint32_t i = tid; i < kCoarseBins; i += kB) {
          mine.view_hist[i] = 0u, mine.total_hist[i] = 0u;
        }
        __syncthreads();
        if (len > 0) CountBinDigits<kB>(keys, len, first, cut_key, shift, mine.view_hist);
        row_sync();
        if (!alone) {
          ExchangeResidentHistograms<kB>(mine.view_hist, mine.total_hist, mine.counts, mine.totals);
          cluster.sync();
        }
        const Boundary bf = FindBoundary<kB>(row_hist, kCoarseBins, k - bd.below, s.scratch);
        const uint32_t f_lo = first + (bf.bin << shift);
        const uint32_t f_hi = min(cut_key, f_lo + ((1u << shift) - 1u));
        f = MakeResidentFrontier(f_lo, f_hi, bd.below + bf.below, bf.in_bin);
      }
      const bool stored = f.count <= kResidentFrontierA;
      candidates = f.count;
      lap(Stat::kCyclesProposal);
      step(Stat::kCyclesResidentBoundary);
      // 3. The committed indices (to the output or rank 0) and the frontier
      // into rank 0, from shared memory (the frontier only when it fits rank
      // 0's store).
      if (len > 0) {
        const LeaderStores to{commits,   lead_out_count,     to_lead, lead_count,
                              lead_hist, Level0Shift(f.top), stored};
        GatherToLeader<kB>(keys, len, beg, f.f_lo, f.f_hi, to, mine.totals->gather);
      }
      if (p.stats != nullptr) __syncthreads();
      step(Stat::kCyclesResidentGather);
      // Past this barrier no rank reads another's shared memory for this row.
      row_sync();
      step(Stat::kCyclesResidentGatherWait);
      if (me != 0) continue;
      lap(Stat::kCyclesAdmit);
      // 4. Rank 0 refines the frontier to the K - committed values left (its
      // slice is dead: frontier B lies over it), after the committed ones.
      if (!stored) RescanBandDigitHist<kB>(row, L, f.cut, f.hi, Level0Shift(f.top), s.hist);
      if (tid == 0) s.refine[0] = lead_a, s.refine[1] = ResidentFrontierB(mine.keys);
      __syncthreads();
      uint32_t* own_commits = direct ? reinterpret_cast<uint32_t*>(out_row) : s.out;
      rescans = Refine<kB, SharedState<kB>, Row, const Frontier&>(
          s, row, L, f.cut, f.hi, f.count, s.refine[0], s.refine[1], k - f.committed,
          p.deterministic != 0, f.top, RefineOut{own_commits, &s.out_count});
      __syncthreads();
    }
    lap(Stat::kCyclesRefine);
    // A direct row holds exactly K indices (L > K): nothing to pad or sort.
    if (!direct) scope.Finalize<kB>(row, s.out, s.out_count, out_row, sort_buf);
    if (tid == 0) {
      scope.SetStatus(RowStatus::kOk);
      AddStat(p, Stat::kResidentRows, 1);
      AddStat(p, Stat::kExactRows, 1);
      CountRefinedRow(p, candidates, rescans);
    }
    __syncthreads();
    lap(Stat::kCyclesFinalize);
    if (tid == 0 && p.row_trace != nullptr) TraceStamp(scope.Trace(), kTraceFinalize);
  }
  // No rank's shared memory is read after this barrier.
  cluster.sync();
#else
  __trap();  // below sm_90: never launched (no clusters; see TOPK_HAS_CLUSTERS)
#endif
}

template <int kB>
cudaLaunchConfig_t ResidentConfig(int grid, int ranks, uint32_t slice_keys, cudaStream_t stream,
                                  cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(grid));
  cfg.blockDim = dim3(kB);
  cfg.dynamicSmemBytes = ResidentSharedBytes<kB>(slice_keys);
  cfg.stream = stream;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = static_cast<unsigned>(ranks);
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

template <typename Row, int kB>
cudaError_t ConfigureResidentKernel() {
  cudaError_t e = cudaFuncSetAttribute(
      ResidentDecodeKernel<Row, kB>, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(ResidentSharedBytes<kB>(kResidentMaxSliceKeys)));
  if (e != cudaSuccess) return e;
  // 16 ranks is above the portable cluster size of 8.
  return cudaFuncSetAttribute(ResidentDecodeKernel<Row, kB>,
                              cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
}

template <int kB>
cudaError_t LaunchResidentOf(const DeviceArgs& args, const DeviceArgs* dev_args,
                             const KernelParams& params, int grid, cudaStream_t stream) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = ResidentConfig<kB>(
      grid, params.split, static_cast<uint32_t>(params.resident_slice_keys), stream, &attr);
  if (params.dtype == static_cast<int32_t>(ScoreType::kFloat32)) {
    return cudaLaunchKernelEx(&cfg, ResidentDecodeKernel<F32Row, kB>, args, dev_args, params);
  }
  return cudaLaunchKernelEx(&cfg, ResidentDecodeKernel<Half16Row, kB>, args, dev_args, params);
}

}  // namespace

cudaError_t ConfigureResidentRoute() {
  cudaError_t e = ConfigureResidentKernel<F32Row, kResidentThreads>();
  if (e == cudaSuccess) e = ConfigureResidentKernel<Half16Row, kResidentThreads>();
  if (e == cudaSuccess) e = ConfigureResidentKernel<F32Row, kResidentWideThreads>();
  if (e == cudaSuccess) e = ConfigureResidentKernel<Half16Row, kResidentWideThreads>();
  return e;
}

// Counted on the 512-thread kernel: both sizes take one SM per CTA (the
// whole register file at 1024 threads, and nearly the same shared memory).
cudaError_t ResidentOccupancy(int ranks, int* clusters) {
  *clusters = 0;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg =
      ResidentConfig<kResidentThreads>(ranks, ranks, kResidentMaxSliceKeys, nullptr, &attr);
  if (cudaOccupancyMaxActiveClusters(clusters, ResidentDecodeKernel<F32Row, kResidentThreads>,
                                     &cfg) != cudaSuccess) {
    // A device without clusters of this size: the route is not offered.
    *clusters = 0;
    cudaGetLastError();
  }
  return cudaSuccess;
}

cudaError_t LaunchResident(const DeviceArgs& args, const DeviceArgs* dev_args,
                           const KernelParams& params, int grid, cudaStream_t stream) {
  if (params.block == kResidentWideThreads) {
    return LaunchResidentOf<kResidentWideThreads>(args, dev_args, params, grid, stream);
  }
  return LaunchResidentOf<kResidentThreads>(args, dev_args, params, grid, stream);
}

}  // namespace topk::cuda
