// The coarse map in software costs ~3 ns per value (FP16 rounding by hand);
// with F16C, vcvtps2ph does the rounding for 8 values at once. Chosen once at
// run time, so the binary still runs on CPUs without AVX2/F16C.
#include "coarse_histogram.h"

#include "topk/keys.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace topk::cpu {
namespace {

uint32_t CoarseOrNanBin(float x) { return IsNan(x) ? 15u : Coarse(x); }

#if defined(__x86_64__)
__attribute__((target("avx2,f16c"))) void AddCoarseHistogramAvx2(const float* x, int64_t n,
                                                                 uint32_t* histogram) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256i max_positive = _mm256_set1_epi32(0x7FFF);
  const __m256i nan_bin = _mm256_set1_epi32(15);
  alignas(32) uint32_t bins[8];
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    // x + 0.0f turns -0.0 into +0.0 (Coarse's canonicalisation), nothing else.
    const __m256 v = _mm256_add_ps(_mm256_loadu_ps(x + i), zero);
    const __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    // Descending 16-bit key: negative halves keep their bits, positive ones flip.
    const __m256i negative = _mm256_cmpgt_epi32(h, max_positive);
    const __m256i descending = _mm256_blendv_epi8(_mm256_sub_epi32(max_positive, h), h, negative);
    __m256i bin = _mm256_srli_epi32(descending, 5);
    const __m256 is_nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    bin = _mm256_blendv_epi8(bin, nan_bin, _mm256_castps_si256(is_nan));
    _mm256_store_si256(reinterpret_cast<__m256i*>(bins), bin);
    for (int j = 0; j < 8; ++j) ++histogram[bins[j]];
  }
  AddCoarseHistogramScalar(x + i, n - i, histogram);
}

bool HaveAvx2F16c() {
  static const bool have = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return have;
}
#endif

}  // namespace

void AddCoarseHistogramScalar(const float* x, int64_t n, uint32_t* histogram) {
  for (int64_t i = 0; i < n; ++i) ++histogram[CoarseOrNanBin(x[i])];
}

void AddCoarseHistogram(const float* x, int64_t n, uint32_t* histogram) {
#if defined(__x86_64__)
  if (HaveAvx2F16c()) {
    AddCoarseHistogramAvx2(x, n, histogram);
    return;
  }
#endif
  AddCoarseHistogramScalar(x, n, histogram);
}

}  // namespace topk::cpu
