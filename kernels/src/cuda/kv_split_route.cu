// The sampled KV-split route (docs/design.md section 3): few long rows, each
// split over `split` CTAs that certify one contiguous segment each into the
// row's shared candidate buffer; the last CTA to arrive refines the row.
#include "cta_state.cuh"
#include "kv_split_band.cuh"
#include "routes.h"
#include "row_scope.cuh"
#include "select_row.cuh"

namespace topk::cuda {
namespace {

// Every segment CTA rebuilds the same view and cutoff from the row id and
// certifies its contiguous segment into the row's shared candidate buffer
// (global count); the last to arrive (row-local arrival counter) builds the
// level-0 histogram from that buffer and refines it like the one-CTA path.
// With kv_band the same pass keeps the band t1 <= x < t0 in a second per-row
// buffer, and an underfilled certified set is finished from certified + band.
// Rows the split cannot serve (short, unusable view, underfill of certified
// and band, NaN) fall back to SelectRow on one CTA, which is exact on its own. Always the
// 512-thread variant (few rows: nothing to overlap across CTAs of one SM).
template <typename Row>
__global__ void __launch_bounds__(kThreads, PersistentVariant<kThreads>::kMinBlocks)
    KvSplitKernel(const DeviceArgs args_in, const DeviceArgs* __restrict__ dev_args,
                  const __grid_constant__ KernelParams p) {
  constexpr int kB = kThreads;
  constexpr int kU = kAdmitUnroll;
  extern __shared__ uint4 smem_raw[];
  SharedState<kB>& s = *reinterpret_cast<SharedState<kB>*>(smem_raw);
  ShareCtaArgs(s, args_in, dev_args, p);
  const DeviceArgs& a = s.args;
  const int64_t r = blockIdx.x / p.split;
  const int seg = static_cast<int>(blockIdx.x % p.split);
  if (r >= a.num_rows) return;
  const uint32_t tid = threadIdx.x;
  // Diagnostics (p.row_trace): segment 0 stamps the row's start, the
  // finisher its end (stamps between the phases cost the kernel registers).
  const bool trace = p.row_trace != nullptr && tid == 0;
  if (trace && seg == 0) TraceStamp(RowTrace(p, r), kTraceStart, false);
  const uint32_t k = static_cast<uint32_t>(p.k);
  const RowScope scope{a, p, r, k};
  const CtaStores& c = s.stores;
  const Frontier& fa = c.fa;
  const Frontier& fb = c.fb;
  uint32_t* out_buf = c.out_buf;
  uint64_t* sort_buf = c.sort_buf;
  const int64_t length = a.lengths[r];
  if (length < 0 || length > a.width || length <= p.k || length < p.min_sampled_length) {
    if (seg == 0) SelectRow<kB, kU, Row>(s, a, p, r, fa, fb, out_buf, sort_buf);
    return;
  }
  const uint32_t L = static_cast<uint32_t>(length);
  const Row row = RowOf<Row>(a, p, r);
  // The row's state (workspace_layout.h): its header, its certified buffer
  // and (kv_band) its band buffer.
  RowHeader* headers = RowHeaders(p);
  uint32_t* bufs = RowBuffers(p);
  RowHeader& rh = headers[r];
  const uint32_t ge = static_cast<uint32_t>(p.row_entries);
  uint32_t* row_buf = CertifiedBuffer(p, bufs, r);
  const Frontier shared_front{nullptr, nullptr, 0, row_buf, row_buf + ge, ge};
  uint32_t* band_buf = BandBuffer(p, bufs, r);
  const Frontier band_front{nullptr, nullptr, 0, band_buf, band_buf + ge, ge};
  const bool band = p.kv_band != 0;

  // Proposal: identical in every segment CTA.
  ClearHist(s);
  if (tid == 0) s.count = 0u, s.nan = 0u, s.out_count = 0u;
  __syncthreads();
  const int stride = p.sample_stride;
  SampleHistogram<kB>(row, L, r, stride, SampleLog2Run(p), s.hist);
  Boundary b0, b1;
  // Without the band only tau0 is used: one warp computes it.
  if (!Propose<kB>(s.hist, p.k, stride, s.scratch, band ? 64u : 32u, &s.t0, &s.t1, &b0, &b1)) {
    if (seg == 0) SelectRow<kB, kU, Row>(s, a, p, r, fa, fb, out_buf, sort_buf);
    return;
  }
  ClearHist(s);
  __syncthreads();
  const float t0 = s.t0;
  const float t1 = band ? s.t1 : t0;
  // Segments of whole 16-byte loads (relative to the row start).
  constexpr uint64_t kV = Row::kPerLoad;
  const uint64_t chunk = ((static_cast<uint64_t>(L) + p.split - 1) / p.split + kV - 1) & ~(kV - 1);
  const uint32_t beg = static_cast<uint32_t>(min(static_cast<uint64_t>(L), seg * chunk));
  const uint32_t end = static_cast<uint32_t>(min(static_cast<uint64_t>(L), beg + chunk));
  if (beg < end && band) {
    AdmitCertifiedAndBand<kB>(
        row.From(beg), end - beg, t0, t1, SegmentClass{shared_front, &rh.count, &rh.neg_min_key},
        SegmentClass{band_front, &rh.band_count, &rh.band_neg_min_key}, &rh.nan, beg);
  } else if (beg < end) {
    AdmitPass<kB, false, true, kU>(row.From(beg), end - beg, t0, 0.f, shared_front, &rh.count,
                                   &rh.neg_min_key, &rh.nan, p.prefetch != 0, beg);
  }
  __threadfence();
  __syncthreads();
  if (tid == 0) s.next_row = atomicAdd(&rh.arrival, 1u);
  __syncthreads();
  if (s.next_row != static_cast<long long>(p.split - 1)) return;
  // Finisher: every segment's candidates, count and histogram are visible.
  __threadfence();
  int32_t* out_row = scope.Out();
  uint32_t C = __ldcg(&rh.count);
  if (__ldcg(&rh.nan) != 0u) {
    scope.Fail<kB>(out_row, RowStatus::kNan);
    return;
  }
  // The admitted set is {x >= cut}: certified alone, or certified + band.
  float cut = t0;
  uint32_t min_key = ~__ldcg(&rh.neg_min_key);
  const bool with_band = C < k && band && C + __ldcg(&rh.band_count) >= k;
  if (with_band) {
    const uint32_t B = __ldcg(&rh.band_count);
    // C < k <= the certified store's capacity; a band that does not fit
    // after it leaves the union to the re-scans (count > capacity).
    if (C + B <= shared_front.capacity()) AppendBandEntries<kB>(band_front, B, shared_front, C);
    C += B;
    cut = t1;
    min_key = min(min_key, ~__ldcg(&rh.band_neg_min_key));  // ~0 = none
  } else if (C < k) {  // underfill: the one-CTA path (band, exact recovery) on this row
    SelectRow<kB, kU, Row>(s, a, p, r, fa, fb, out_buf, sort_buf);
    return;
  }
  // s.hist is still zero (cleared before the segment pass): the level-0
  // histogram of every segment's candidates.
  int top = 0;
  if (C <= shared_front.capacity()) {
    top = CommonKeyBits(min_key, Key32(cut));
    FrontierDigitHist<kB>(shared_front, 0, C, Level0Shift(top), s.hist);
  } else {
    RescanDigitHist<kB>(row, L, cut, s.hist);
  }
  if (tid == 0) {
    s.out_count = 0u;
    AddStat(p, Stat::kSampled, 1);
    AddStat(p, with_band ? Stat::kBandRescued : Stat::kCertified, 1);
  }
  if (tid == 0) s.refine[0] = shared_front, s.refine[1] = fb;
  __syncthreads();
  const uint32_t rescans = Refine<kB, SharedState<kB>, Row, const Frontier&>(
      s, row, L, cut, NoUpperBound(), C, s.refine[0], s.refine[1], k, p.deterministic != 0, top,
      RefineOut{out_buf, &s.out_count});
  __syncthreads();
  const uint32_t count = s.out_count;
  scope.Finalize<kB>(row, out_buf, count, out_row, sort_buf);
  if (tid == 0) {
    if (trace) TraceStamp(scope.Trace(), kTraceFinalize, false);
    scope.SetStatus(RowStatus::kOk);
    CountRefinedRow(p, C, rescans);
  }
}

}  // namespace

cudaError_t ConfigureKvSplitRoute() {
  const int smem = static_cast<int>(PersistentSharedBytes(kThreads));
  const cudaError_t e = cudaFuncSetAttribute(KvSplitKernel<F32Row>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  return cudaFuncSetAttribute(KvSplitKernel<Half16Row>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              smem);
}

cudaError_t LaunchKvSplit(const DeviceArgs& args, const DeviceArgs* dev_args,
                          const KernelParams& params, int grid, cudaStream_t stream) {
  // The row claim counters are unused here but zeroed too: every launch
  // leaves them 0 (the workspace contract the tests check).
  cudaError_t e = params.zero_counters != 0
                      ? cudaMemsetAsync(params.counters, 0, 2 * sizeof(uint32_t), stream)
                      : cudaSuccess;
  if (e != cudaSuccess) return e;
  e = cudaMemsetAsync(params.row_state, 0, RowStateZeroBytes(params.max_rows), stream);
  if (e != cudaSuccess) return e;
  const size_t smem = PersistentSharedBytes(kThreads);
  if (params.dtype == static_cast<int32_t>(ScoreType::kFloat32)) {
    KvSplitKernel<F32Row><<<grid, kThreads, smem, stream>>>(args, dev_args, params);
  } else {
    KvSplitKernel<Half16Row><<<grid, kThreads, smem, stream>>>(args, dev_args, params);
  }
  return cudaGetLastError();
}

}  // namespace topk::cuda
