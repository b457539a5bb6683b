// Per-row selection: strided proposal -> fused admit pass (certify) -> band
// rescue -> exact coarse recovery, all handing a frontier to the 11/11/10
// radix refinement. Every frontier is kept in ascending index order, which is
// what makes "ties to the smallest indices" a prefix take at the end.
#include "row_selector.h"

#include <algorithm>
#include <numeric>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include <type_traits>

#include "coarse_histogram.h"
#include "topk/algorithm_constants.h"

namespace topk::cpu {
namespace {

constexpr int kChunk = 16;

#if defined(__SSE2__)
// Appends the lanes of `admitted` (bit j: position i + j) to dst.
inline int64_t AppendLanes(uint32_t admitted, int64_t i, int32_t* dst, int64_t count) {
  while (admitted != 0) {
    dst[count++] = static_cast<int32_t>(i + __builtin_ctz(admitted));
    admitted &= admitted - 1;
  }
  return count;
}

// FP32 chunks of 16 are screened with !(x < lo), which is also true for NaN,
// so the common chunk (nothing admitted, no NaN) costs four vector compares
// and the NaN check rides along for free.
template <bool kBand>
int64_t AdmitChunksFp32(const float* x, int64_t n, float lo, float hi, int32_t* dst, int64_t* count,
                        bool* nan) {
  const __m128 vlo = _mm_set1_ps(lo);
  const __m128 vhi = _mm_set1_ps(hi);
  int64_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    __m128 v[4];
    uint32_t screen = 0;
    for (int q = 0; q < 4; ++q) {
      v[q] = _mm_loadu_ps(x + i + 4 * q);
      screen |= static_cast<uint32_t>(_mm_movemask_ps(_mm_cmpnlt_ps(v[q], vlo))) << (4 * q);
    }
    if (screen == 0) continue;
    uint32_t admitted = 0;
    for (int q = 0; q < 4; ++q) {
      __m128 in = _mm_cmpge_ps(v[q], vlo);  // false for NaN
      if (kBand) in = _mm_and_ps(in, _mm_cmplt_ps(v[q], vhi));
      admitted |= static_cast<uint32_t>(_mm_movemask_ps(in)) << (4 * q);
    }
    uint32_t ge = admitted;
    if (kBand) {
      ge = 0;
      for (int q = 0; q < 4; ++q) {
        ge |= static_cast<uint32_t>(_mm_movemask_ps(_mm_cmpge_ps(v[q], vlo))) << (4 * q);
      }
    }
    *nan |= (screen & ~ge) != 0;  // screened but not >= lo: NaN lanes
    *count = AppendLanes(admitted, i, dst, *count);
  }
  return i;
}

// 16-bit chunks of 16 (two registers of 8): Rank16 in integer lanes
// (magnitude, negated where the sign is set), NaN as a magnitude above the
// infinity's. A chunk is screened by "rank >= lo or NaN", as for FP32.
template <typename Scores, bool kBand>
int64_t AdmitChunks16(const uint16_t* x, int64_t n, int32_t lo, int32_t hi, int32_t* dst,
                      int64_t* count, bool* nan) {
  const __m128i vlo = _mm_set1_epi16(static_cast<int16_t>(lo));
  const __m128i vhi = _mm_set1_epi16(static_cast<int16_t>(hi));
  const __m128i magnitude_mask = _mm_set1_epi16(0x7FFF);
  const __m128i inf_magnitude = _mm_set1_epi16(static_cast<int16_t>(Scores::kInfMagnitude));
  int64_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    __m128i rank[2];
    __m128i is_nan[2];
    __m128i ge[2];
    for (int q = 0; q < 2; ++q) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i + 8 * q));
      const __m128i magnitude = _mm_and_si128(h, magnitude_mask);
      const __m128i negative = _mm_srai_epi16(h, 15);
      rank[q] = _mm_sub_epi16(_mm_xor_si128(magnitude, negative), negative);
      is_nan[q] = _mm_cmpgt_epi16(magnitude, inf_magnitude);
      ge[q] = _mm_cmpeq_epi16(_mm_cmpgt_epi16(vlo, rank[q]), _mm_setzero_si128());
    }
    const uint32_t screen = static_cast<uint32_t>(_mm_movemask_epi8(
        _mm_packs_epi16(_mm_or_si128(ge[0], is_nan[0]), _mm_or_si128(ge[1], is_nan[1]))));
    if (screen == 0) continue;
    __m128i in[2];
    for (int q = 0; q < 2; ++q) {
      in[q] = _mm_andnot_si128(is_nan[q], ge[q]);
      if (kBand) in[q] = _mm_and_si128(in[q], _mm_cmpgt_epi16(vhi, rank[q]));
    }
    *nan |= _mm_movemask_epi8(_mm_packs_epi16(is_nan[0], is_nan[1])) != 0;
    *count = AppendLanes(static_cast<uint32_t>(_mm_movemask_epi8(_mm_packs_epi16(in[0], in[1]))), i,
                         dst, *count);
  }
  return i;
}
#endif

// Appends every i with rank(x[i]) >= lo (and < hi when kBand) to dst and
// returns the count; NaN is never admitted and is reported in saw_nan.
// Vector chunks append admitted lanes from a bit mask: no data-dependent
// branch per element.
template <typename Scores, bool kBand>
int64_t Admit(const typename Scores::Storage* x, int64_t n, typename Scores::Rank lo,
              typename Scores::Rank hi, int32_t* dst, bool* saw_nan) {
  int64_t count = 0;
  bool nan = false;
  int64_t i = 0;
#if defined(__SSE2__)
  if constexpr (std::is_same_v<Scores, Fp32Scores>) {
    i = AdmitChunksFp32<kBand>(x, n, lo, hi, dst, &count, &nan);
  } else {
    i = AdmitChunks16<Scores, kBand>(x, n, lo, hi, dst, &count, &nan);
  }
#endif
  for (; i < n; ++i) {
    const bool is_nan = Scores::IsNan(x[i]);
    const typename Scores::Rank v = Scores::RankOf(x[i]);
    dst[count] = static_cast<int32_t>(i);
    count += !is_nan & (v >= lo) & (!kBand || v < hi);
    nan |= is_nan;
  }
  *saw_nan = nan;
  return count;
}

// First bin whose prefix sum reaches `target` (the histogram sums to >= target).
uint32_t BinReaching(const uint32_t* histogram, int bins, int64_t target, int64_t* below) {
  int64_t prefix = 0;
  for (int b = 0; b < bins; ++b) {
    if (prefix + histogram[b] >= target) {
      *below = prefix;
      return static_cast<uint32_t>(b);
    }
    prefix += histogram[b];
  }
  *below = prefix;
  return static_cast<uint32_t>(bins - 1);
}

class Emitter {
 public:
  explicit Emitter(int32_t* out) : out_(out) {}
  void Emit(int32_t i) { out_[count_++] = i; }
  void EmitAll(const int32_t* src, int64_t n) {
    std::copy(src, src + n, out_ + count_);
    count_ += n;
  }
  int64_t count() const { return count_; }

 private:
  int32_t* out_;
  int64_t count_ = 0;
};

// Phase 3: exact refinement of a frontier (ascending indices in `frontier`,
// size n) with `quota` slots left, digit by digit of the key (11/11/10; the
// 16-bit types stop after two digits, the third being zero), then
// the tie fill from the equal-key remainder (smallest indices first). Scores
// are gathered once into a key array that travels with the indices, so the
// digit passes read contiguous memory. `next` must not overlap the frontier;
// both, and each half of `keys`, hold at least n entries.
template <typename Scores>
void Refine(const typename Scores::Storage* x, int32_t* frontier, int64_t n, int64_t quota,
            int32_t* next, uint32_t* keys, uint32_t* next_keys, Emitter& emit,
            uint32_t* histogram) {
  if (quota >= n) {
    emit.EmitAll(frontier, n);
    return;
  }
  int32_t* cur = frontier;
  for (int64_t j = 0; j < n; ++j) keys[j] = Scores::Key(x[cur[j]]);
  for (int digit = 0; digit < Scores::kRefineDigits && quota < n; ++digit) {
    const int bins = 1 << kDigitBits[digit];
    std::fill(histogram, histogram + bins, 0u);
    for (int64_t j = 0; j < n; ++j) ++histogram[KeyDigit(keys[j], digit)];
    int64_t below;
    const uint32_t boundary = BinReaching(histogram, bins, quota, &below);
    int64_t kept = 0;
    for (int64_t j = 0; j < n; ++j) {
      const uint32_t d = KeyDigit(keys[j], digit);
      if (d < boundary) {
        emit.Emit(cur[j]);
      } else if (d == boundary) {
        next[kept] = cur[j];
        next_keys[kept++] = keys[j];
      }
    }
    quota -= below;
    n = kept;
    std::swap(cur, next);
    std::swap(keys, next_keys);
  }
  emit.EmitAll(cur, std::min(quota, n));
}

// Histograms the coarse bins of x[0, length); false on a NaN. The FP32
// histogram counts NaN in bin 15, outside the non-NaN range [31, 2016], so it
// detects NaN without another pass; BF16 values go through it too, widened a
// block at a time (their bin is the FP32 map's, and the vector FP16 rounding
// is the costly part). FP16's map is the key's top bits, cheap one by one, but
// it puts positive NaN next to +inf's bin, so those rows test each value.
template <typename Scores>
bool CoarseHistogramOfRow(const typename Scores::Storage* x, int32_t length, uint32_t* histogram) {
  std::fill(histogram, histogram + kCoarseBins, 0u);
  if constexpr (std::is_same_v<Scores, Fp32Scores>) {
    AddCoarseHistogram(x, length, histogram);
    return histogram[15] == 0;
  } else if constexpr (std::is_same_v<Scores, Bf16Scores>) {
    constexpr int32_t kBlock = 256;
    float widened[kBlock];
    for (int32_t begin = 0; begin < length; begin += kBlock) {
      const int32_t n = std::min(kBlock, length - begin);
      for (int32_t j = 0; j < n; ++j) widened[j] = Bf16BitsToFloat(x[begin + j]);
      AddCoarseHistogram(widened, n, histogram);
    }
    return histogram[15] == 0;
  } else {
    bool nan = false;
    for (int32_t i = 0; i < length; ++i) {
      nan |= Scores::IsNan(x[i]);
      ++histogram[Scores::Coarse(x[i])];
    }
    return !nan;
  }
}

// Exact coarse recovery: histogram the coarse bins of the whole row, commit
// every bin before tau*, refine tau*'s bin. Returns false on a NaN.
template <typename Scores>
bool ExactRecovery(const typename Scores::Storage* x, int32_t length, int32_t k, Emitter& emit,
                   RowScratch& scratch) {
  uint32_t* histogram = scratch.histogram.data();
  if (!CoarseHistogramOfRow<Scores>(x, length, histogram)) return false;
  int64_t below;
  const uint32_t tau = BinReaching(histogram, kCoarseBins, k, &below);
  // rank(x) >= CutoffRank(b) <=> coarse(x) <= b for non-NaN x (the row has
  // none here): compare ranks only. The commit cutoff admits nothing when tau
  // is +inf's bin.
  const typename Scores::Rank commit_cutoff = Scores::CutoffRank(tau - 1);
  const typename Scores::Rank frontier_cutoff = Scores::CutoffRank(tau);
  int32_t* frontier = scratch.ping.data();
  int64_t n = 0;
  for (int32_t i = 0; i < length; ++i) {
    const typename Scores::Rank v = Scores::RankOf(x[i]);
    if (v >= commit_cutoff) {
      emit.Emit(i);
    } else if (v >= frontier_cutoff) {
      frontier[n++] = i;
    }
  }
  Refine<Scores>(x, frontier, n, k - emit.count(), scratch.pong.data(), scratch.KeysA(),
                 scratch.KeysB(), emit, scratch.histogram.data());
  return true;
}

void FillEmpty(int32_t* out, int32_t k) { std::fill(out, out + k, kEmptySlot); }

template <typename Scores>
bool HasNan(const typename Scores::Storage* x, int32_t length) {
  bool nan = false;
  for (int32_t i = 0; i < length; ++i) nan |= Scores::IsNan(x[i]);
  return nan;
}

// Sorted: value descending (key ascending, so -0 ties +0), ties by index.
// Deterministic unsorted: ascending indices.
template <typename Scores>
void Order(const typename Scores::Storage* x, int32_t* out, int64_t count,
           const RowParams& params) {
  if (params.sorted) {
    std::sort(out, out + count, [x](int32_t a, int32_t b) {
      const uint32_t ka = Scores::Key(x[a]);
      const uint32_t kb = Scores::Key(x[b]);
      return ka != kb ? ka < kb : a < b;
    });
  } else if (params.deterministic) {
    std::sort(out, out + count);
  }
}

}  // namespace

void RowScratch::Reserve(int64_t width) {
  if (static_cast<int64_t>(ping.size()) < width) {
    ping.resize(width);
    pong.resize(width);
    keys.resize(2 * width);
  }
}

template <typename Scores>
RowResult SelectRow(const typename Scores::Storage* x, int32_t length, int64_t row,
                    const RowParams& params, int32_t* out, RowScratch& scratch) {
  const int32_t k = params.k;
  RowResult result;
  if (length <= k) {
    if (HasNan<Scores>(x, length)) {
      FillEmpty(out, k);
      result.status = RowStatus::kNan;
      return result;
    }
    std::iota(out, out + length, 0);
    std::fill(out + length, out + k, kEmptySlot);
    Order<Scores>(x, out, length, params);
    return result;
  }

  Emitter emit(out);
  const int32_t stride = params.stride;
  const int32_t phase = SamplePhase(row, stride);
  const int64_t q0 = ProposalQuota(k, stride);
  const int64_t q1 = RescueQuota(k, stride);
  const bool sample =
      params.sampling && length >= kMinSampledWidth && ViewSize(length, phase, stride) >= q1;
  bool nan = false;
  if (sample) {
    // Phase 1: coarse histogram of the strided view -> tau0 (q0), tau1 (q1).
    uint32_t* histogram = scratch.histogram.data();
    std::fill(histogram, histogram + kCoarseBins, 0u);
    for (int64_t i = phase; i < length; i += stride) ++histogram[Scores::Coarse(x[i])];
    int64_t below;
    const uint32_t tau0 = BinReaching(histogram, kCoarseBins, q0, &below);
    const uint32_t tau1 = BinReaching(histogram, kCoarseBins, q1, &below);
    const typename Scores::Rank t0 = Scores::CutoffRank(tau0);

    // Phase 2: one pass admits x >= t(tau0) and flags NaN.
    int32_t* candidates = scratch.ping.data();
    const int64_t c0 = Admit<Scores, false>(x, length, t0, t0, candidates, &nan);
    if (nan) {
      FillEmpty(out, k);
      result.status = RowStatus::kNan;
      return result;
    }
    if (c0 >= k) {  // certified (Lemma 4.1)
      result.path = RowPath::kCertified;
      result.candidates = c0;
      Refine<Scores>(x, candidates, c0, k, scratch.pong.data(), scratch.KeysA(), scratch.KeysB(),
                     emit, histogram);
    } else {
      // Underfill: everything >= t0 is in; the band [t(tau1), t0) may finish it.
      bool unused;
      const int64_t band =
          Admit<Scores, true>(x, length, Scores::CutoffRank(tau1), t0, candidates + c0, &unused);
      if (c0 + band >= k) {
        result.path = RowPath::kBandRescued;
        result.candidates = c0 + band;
        emit.EmitAll(candidates, c0);
        // The band is a frontier of its own: every value in it is < t0.
        Refine<Scores>(x, candidates + c0, band, k - c0, scratch.pong.data(), scratch.KeysA(),
                       scratch.KeysB(), emit, histogram);
      } else {
        result.path = RowPath::kExactRecovery;
        ExactRecovery<Scores>(x, length, k, emit, scratch);
      }
    }
  } else {
    result.path = RowPath::kExactRecovery;
    if (!ExactRecovery<Scores>(x, length, k, emit, scratch)) {
      FillEmpty(out, k);
      result.status = RowStatus::kNan;
      return result;
    }
  }
  Order<Scores>(x, out, k, params);
  return result;
}

template RowResult SelectRow<Fp32Scores>(const float*, int32_t, int64_t, const RowParams&, int32_t*,
                                         RowScratch&);
template RowResult SelectRow<Bf16Scores>(const uint16_t*, int32_t, int64_t, const RowParams&,
                                         int32_t*, RowScratch&);
template RowResult SelectRow<Fp16Scores>(const uint16_t*, int32_t, int64_t, const RowParams&,
                                         int32_t*, RowScratch&);

}  // namespace topk::cpu
