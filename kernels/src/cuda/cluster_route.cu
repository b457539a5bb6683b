// The cluster route (docs/design.md section 3): few long rows, each split
// across a thread-block cluster of 8 (or 16, non-portable) CTAs that work on
// one row together through distributed shared memory. Per row:
//   1. every rank builds the coarse histogram of its part of the row's view;
//      the histograms are all-reduced (ClusterAllReduceHistogram), so every
//      rank holds the whole view's histogram and derives the same tau0 / tau1;
//   2. one classification pass per rank keeps x >= t0 (certified) and
//      t1 <= x < t0 (band) apart (ClassifyCertifiedAndBand);
//   3. the counts are all-reduced (ReadClusterTotals): the certified set, or
//      the certified set and the band, reach K without another read; only a
//      row that neither reaches takes the exact fallback, an all-reduced
//      coarse histogram of every rank's segment and one more classification
//      pass, still spread over the cluster;
//   4. every rank pushes its part of the frontier and its level-0 digits into
//      rank 0 (PushToLeader), and rank 0 refines and writes the row while
//      the others go on to the cluster's next row.
// Rows the split does not serve (bad length, L <= K, L below the sampled
// length) go to SelectRow on rank 0 alone. Clusters take rows in turn
// (row = cluster id, + clusters, ...).
#include <cooperative_groups.h>

#include "cluster_classify.cuh"
#include "cluster_gather.cuh"
#include "cluster_histogram.cuh"
#include "cluster_state.cuh"
#include "exact_recovery.cuh"
#include "routes.h"
#include "row_scope.cuh"
#include "select_row.cuh"

namespace topk::cuda {
namespace {

namespace cg = cooperative_groups;

// kPerSm: CTAs per SM (ClusterLayout): 1 (more shared memory, up to 128
// registers) or 2 (64 registers, the rank's arrays in arena B; twice the
// resident clusters, and one cluster streams while another is in its
// latency-bound phases).
template <typename Row, int kPerSm>
__global__ void __launch_bounds__(kThreads, kPerSm)
    ClusterSelectKernel(const DeviceArgs args_in, const DeviceArgs* __restrict__ dev_args,
                        const __grid_constant__ KernelParams p) {
#if TOPK_HAS_CLUSTERS
  constexpr int kB = kThreads;
  constexpr int kU = kAdmitUnroll;
  using Lay = ClusterLayout<kPerSm>;
  extern __shared__ uint4 smem_raw[];
  SharedState<kB>& s = *reinterpret_cast<SharedState<kB>*>(smem_raw);
  const ClusterRank me_arrays = MakeClusterRank<kPerSm>(s);
  ClusterCounts& counts = *me_arrays.counts;
  cg::cluster_group cluster = cg::this_cluster();
  const uint32_t ranks = cluster.num_blocks();
  const uint32_t me = cluster.block_rank();
  const int64_t first_row = blockIdx.x / ranks;
  const int64_t clusters = gridDim.x / ranks;
  ShareCtaArgs(s, args_in, dev_args, p);
  const DeviceArgs& a = s.args;
  const uint32_t tid = threadIdx.x;
  const uint32_t k = static_cast<uint32_t>(p.k);
  // The persistent route's row counters are unused here; every launch still
  // leaves them 0 (the workspace contract), without a memset node.
  if (blockIdx.x == 0 && tid == 0) p.counters[0] = 0u, p.counters[1] = 0u;
  const CtaStores& c = s.stores;
  // The rank's slice: certified entries past its store in the A part,
  // band entries in the B part.
  const uint32_t g = static_cast<uint32_t>(p.slice_entries);
  const CtaSlice slice{CtaSliceBase(p, blockIdx.x), g};
  const Frontier cert{me_arrays.cert_idx, me_arrays.cert_key, kClusterRankStore,
                      slice.AIdx(),       slice.AKey(),       g};
  const Frontier band{me_arrays.band_idx, me_arrays.band_key, kClusterRankStore,
                      slice.BIdx(),       slice.BKey(),       g};
  uint32_t* arena = FrontierArena(s);
  constexpr uint32_t ca = Lay::kFrontierA, cb = Lay::kFrontierB;
  // Rank 0's refinement stores: A holds the gathered frontier (shared only);
  // B may spill to rank 0's band slice (read by the gather before).
  const Frontier lead_a{arena, arena + ca, ca, nullptr, nullptr, 0};
  const Frontier lead_b{arena + 2 * ca, arena + 2 * ca + cb, cb, slice.BIdx(), slice.BKey(), g};
  const Frontier to_lead{cluster.map_shared_rank(arena, 0),
                         cluster.map_shared_rank(arena + ca, 0),
                         ca,
                         nullptr,
                         nullptr,
                         0};
  uint32_t* lead_hist = cluster.map_shared_rank(s.hist, 0);
  const int stride = p.sample_stride;
  const int log2_run = SampleLog2Run(p);
  const uint32_t q0 = static_cast<uint32_t>(ProposalQuota(p.k, stride));
  const uint32_t q1 = static_cast<uint32_t>(RescueQuota(p.k, stride));

  for (int64_t r = first_row; r < a.num_rows; r += clusters) {
    const RowScope scope{a, p, r, k};
    const int64_t length = a.lengths[r];
    if (length < 0 || length > a.width || length <= p.k || length < p.min_sampled_length ||
        stride <= 0) {
      if (me == 0) SelectRow<kB, kU, Row>(s, a, p, r, c.fa, c.fb, c.out_buf, c.sort_buf);
      continue;
    }
    // Rank 0's phase timers (its mark in a register: every rank computes it).
    long long clock_mark = clock64();
    const PhaseClock clock{p, clock_mark};
    auto lap = [&](Stat st) {
      if (me == 0) clock.Lap(st);
    };
    const uint32_t L = static_cast<uint32_t>(length);
    const Row row = RowOf<Row>(a, p, r);
    // The rank's segment: whole view groups (stride x run positions, a
    // multiple of the 16-byte load) from the row start, so the ranks' views
    // together are exactly the row's view.
    const uint64_t group = static_cast<uint64_t>(stride) << log2_run;
    const uint64_t chunk =
        ((static_cast<uint64_t>(L) + ranks - 1) / ranks + group - 1) / group * group;
    const uint32_t beg = static_cast<uint32_t>(min(static_cast<uint64_t>(L), me * chunk));
    const uint32_t len = static_cast<uint32_t>(min(static_cast<uint64_t>(L), beg + chunk)) - beg;
    const Row seg = row.From(beg);
    for (uint32_t i = tid; i < kCoarseBins; i += kB) me_arrays.view_hist[i] = 0u, s.hist[i] = 0u;
    if (tid == 0) counts = ClusterCounts{}, s.out_count = 0u;
    __syncthreads();
    if (len > 0) SampleHistogram<kB>(seg, len, r, stride, log2_run, me_arrays.view_hist);
    cluster.sync();
    ClusterAllReduceHistogram<kB>(me_arrays.view_hist, me_arrays.total_hist);
    cluster.sync();
    // Every rank holds the whole view's histogram: every rank derives the
    // same cutoffs.
    Boundary b0, b1;
    const bool sampled = ProposeBoundaries<kB>(me_arrays.total_hist, q0, q1, s.scratch, &b0, &b1);
    float cut = 0.f;
    bool with_band = false, exact = !sampled;
    ClusterTotals t;
    if (sampled) {
      CoarseCutoffPair(64u, b0.bin, b1.bin, &s.t0, &s.t1);
      __syncthreads();
      lap(Stat::kCyclesProposal);
      const float t0 = s.t0, t1 = s.t1;
      if (len > 0) ClassifyCertifiedAndBand<kB, kU>(seg, len, beg, t0, t1, cert, band, &counts);
      cluster.sync();
      t = ReadClusterTotals(&counts);
      if (!t.nan) {
        if (t.certified >= k) {
          cut = t0;
        } else if (t.certified + t.band >= k) {
          cut = t1, with_band = true;
        } else {
          exact = true;
        }
      }
    }
    if (exact && !t.nan) {
      if (sampled) cluster.sync();  // every rank has read the counts reset below
      for (uint32_t i = tid; i < kCoarseBins; i += kB) me_arrays.view_hist[i] = 0u;
      if (tid == 0) counts = ClusterCounts{};
      __syncthreads();
      if (len > 0) CoarseHistPass<kB>(seg, len, me_arrays.view_hist, &counts.nan);
      cluster.sync();
      ClusterAllReduceHistogram<kB>(me_arrays.view_hist, me_arrays.total_hist);
      t = ReadClusterTotals(&counts);
      cluster.sync();
      if (!t.nan) {
        const Boundary bd = FindBoundary<kB>(me_arrays.total_hist, kCoarseBins, k, s.scratch);
        if (tid < 32) {
          const float v = WarpCoarseCutoff(bd.bin);
          if (tid == 0) s.t0 = v;
        }
        __syncthreads();
        cut = s.t0;
        // Certifies by construction: every bin up to the K-th value's.
        if (len > 0) ClassifyCertifiedAndBand<kB, kU>(seg, len, beg, cut, cut, cert, band, &counts);
        cluster.sync();
        t = ReadClusterTotals(&counts);
      }
    }
    const uint32_t C = t.certified + (with_band ? t.band : 0u);
    const bool stored = C <= ca;
    const int top = stored ? CommonKeyBits(~t.neg_min_key, Key32(cut)) : 0;
    if (!t.nan && stored) {
      // The frontier in rank 0's A: every rank's certified entries in rank
      // order, then (band) every rank's band entries.
      const int shift0 = Level0Shift(top);
      PushToLeader<kB>(cert, counts.certified, to_lead, t.certified_before, shift0, lead_hist);
      if (with_band) {
        PushToLeader<kB>(band, counts.band, to_lead, t.certified + t.band_before, shift0,
                         lead_hist);
      }
    }
    // Past this barrier no rank reads another's shared memory for this row.
    cluster.sync();
    if (me != 0) continue;
    lap(Stat::kCyclesAdmit);
    int32_t* out_row = scope.Out();
    if (t.nan) {
      scope.Fail<kB>(out_row, RowStatus::kNan);
      __syncthreads();
      continue;
    }
    if (!stored) RescanDigitHist<kB>(row, L, cut, s.hist);
    // Rewritten per row: a fallback row's SelectRow uses the same fields.
    if (tid == 0) s.refine[0] = lead_a, s.refine[1] = lead_b;
    __syncthreads();
    const uint32_t rescans = Refine<kB, SharedState<kB>, Row, const Frontier&>(
        s, row, L, cut, NoUpperBound(), C, s.refine[0], s.refine[1], k, p.deterministic != 0, top,
        RefineOut{s.out, &s.out_count});
    __syncthreads();
    lap(Stat::kCyclesRefine);
    scope.Finalize<kB>(row, s.out, s.out_count, out_row, reinterpret_cast<uint64_t*>(arena));
    if (tid == 0) {
      scope.SetStatus(RowStatus::kOk);
      AddStat(p, Stat::kClusterRows, 1);
      AddStat(p, Stat::kRows, 1);
      AddStat(p, Stat::kCandidates, C);
      if (sampled) AddStat(p, Stat::kSampled, 1);
      if (!exact) AddStat(p, with_band ? Stat::kBandRescued : Stat::kCertified, 1);
      if (exact && sampled) AddStat(p, Stat::kExactRecovery, 1);
      if (exact) AddStat(p, Stat::kExactRows, 1);
      if (rescans) AddStat(p, Stat::kRescans, rescans);
    }
    __syncthreads();
    lap(Stat::kCyclesFinalize);
  }
  // No rank's shared memory is read after this barrier.
  cluster.sync();
#else
  __trap();  // below sm_90: never launched (no clusters; see TOPK_HAS_CLUSTERS)
#endif
}

template <int kPerSm>
cudaLaunchConfig_t ClusterConfig(int grid, int ranks, cudaStream_t stream,
                                 cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(grid));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = ClusterSharedBytes<kPerSm>();
  cfg.stream = stream;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = static_cast<unsigned>(ranks);
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

template <typename Row, int kPerSm>
cudaError_t ConfigureClusterKernel() {
  cudaError_t e = cudaFuncSetAttribute(ClusterSelectKernel<Row, kPerSm>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(ClusterSharedBytes<kPerSm>()));
  if (e != cudaSuccess) return e;
  // 16 ranks is above the portable cluster size of 8.
  return cudaFuncSetAttribute(ClusterSelectKernel<Row, kPerSm>,
                              cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
}

template <int kPerSm>
cudaError_t Occupancy(int ranks, int* clusters) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = ClusterConfig<kPerSm>(ranks, ranks, nullptr, &attr);
  return cudaOccupancyMaxActiveClusters(clusters, ClusterSelectKernel<F32Row, kPerSm>, &cfg);
}

template <int kPerSm>
cudaError_t Launch(const DeviceArgs& args, const DeviceArgs* dev_args, const KernelParams& params,
                   int grid, cudaStream_t stream) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = ClusterConfig<kPerSm>(grid, params.split, stream, &attr);
  if (params.dtype == static_cast<int32_t>(ScoreType::kFloat32)) {
    return cudaLaunchKernelEx(&cfg, ClusterSelectKernel<F32Row, kPerSm>, args, dev_args, params);
  }
  return cudaLaunchKernelEx(&cfg, ClusterSelectKernel<Half16Row, kPerSm>, args, dev_args, params);
}

}  // namespace

cudaError_t ConfigureClusterRoute() {
  cudaError_t e = ConfigureClusterKernel<F32Row, 1>();
  if (e == cudaSuccess) e = ConfigureClusterKernel<Half16Row, 1>();
  if (e == cudaSuccess) e = ConfigureClusterKernel<F32Row, 2>();
  if (e == cudaSuccess) e = ConfigureClusterKernel<Half16Row, 2>();
  return e;
}

cudaError_t ClusterOccupancy(int ranks, int ctas_per_sm, int* clusters) {
  *clusters = 0;
  const cudaError_t e =
      ctas_per_sm == 2 ? Occupancy<2>(ranks, clusters) : Occupancy<1>(ranks, clusters);
  if (e != cudaSuccess) {
    // A device without clusters of this size: the route is not offered.
    *clusters = 0;
    cudaGetLastError();
  }
  return cudaSuccess;
}

cudaError_t LaunchCluster(const DeviceArgs& args, const DeviceArgs* dev_args,
                          const KernelParams& params, int grid, cudaStream_t stream) {
  return params.cluster_ctas_per_sm == 2 ? Launch<2>(args, dev_args, params, grid, stream)
                                         : Launch<1>(args, dev_args, params, grid, stream);
}

}  // namespace topk::cuda
