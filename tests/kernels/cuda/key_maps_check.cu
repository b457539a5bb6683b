#include "block_primitives.cuh"
#include "key_maps_check.cuh"
#include "score_row.cuh"
#include "topk/contract.h"
#include "topk/keys.h"

namespace topk::cuda {
namespace {

__global__ void HalfConversionCheckKernel(unsigned long long* mismatches, unsigned int* first) {
  unsigned long long local = 0;
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t u = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; u <= 0xFFFFFFFFull;
       u += stride) {
    const float f = BitsToFloat(static_cast<uint32_t>(u));
    const bool coarse_differs = !IsNan(f) && CoarseOfNumber(f) != Coarse(f);
    // The pair map with every pattern in each place: f first, f's negation second.
    const float g = BitsToFloat(static_cast<uint32_t>(u) ^ 0x80000000u);
    uint32_t bin_f, bin_g;
    CoarsePairOfNumbers(f, g, &bin_f, &bin_g);
    const bool pair_differs =
        (!IsNan(f) && bin_f != Coarse(f)) || (!IsNan(g) && bin_g != Coarse(g));
    if (HalfBitsRoundNearest(f) != HalfBitsRoundNearestSoftware(f) || coarse_differs ||
        pair_differs) {
      ++local;
      atomicMin(first, static_cast<unsigned int>(u));
    }
  }
  if (local != 0) atomicAdd(mismatches, local);
}

__device__ void Count(unsigned long long* mismatches, unsigned int* first, int check,
                      uint32_t pattern) {
  atomicAdd(&mismatches[check], 1ull);
  atomicMin(&first[check], pattern);
}

// cut[b] = WarpCoarseCutoff(b), one warp per bin as the kernels compute it,
// and cut[kCoarseBins + b] the widened 16-bit cutoff pattern of keys.h; the
// closed form (the resident route's) against the warp's search, bin by bin.
__global__ void CutoffKernel(int dtype, float* cut, unsigned long long* mismatches,
                             unsigned int* first) {
  const uint32_t b = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const float t = WarpCoarseCutoff(b);
  if ((threadIdx.x & 31) == 0 && b < kCoarseBins) {
    cut[b] = t;
    cut[kCoarseBins + b] =
        dtype == static_cast<int>(ScoreType::kFloat16) ? CoarseCutoffFp16(b) : CoarseCutoffBf16(b);
    if (FloatBits(CoarseCutoffClosedForm(b)) != FloatBits(t)) {
      Count(mismatches, first, kClosedFormCutoff, b);
    }
  }
}

// One thread per 16-bit pattern h.
__global__ void ScoreType16CheckKernel(int dtype, const float* cut, unsigned long long* mismatches,
                                       unsigned int* first) {
  const uint32_t h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h > 0xFFFFu) return;
  const bool fp16 = dtype == static_cast<int>(ScoreType::kFloat16);
  const Half16Row view{nullptr, fp16 ? 1u : 0u};
  const uint16_t h16 = static_cast<uint16_t>(h);
  const float x = view.Widen(h);
  const float want = fp16 ? Fp16BitsToFloatSoftware(h16) : Bf16BitsToFloat(h16);
  const bool nan16 = fp16 ? IsFp16Nan(h16) : IsBf16Nan(h16);
  if (FloatBits(x) != FloatBits(want) && !(nan16 && IsNan(x))) {
    Count(mismatches, first, kWidenScalar, h);
  }
  // The pattern as the low and as the high half of a loaded word.
  const uint32_t word_lo = h | 0x3C000000u, word_hi = (h << 16) | 0x3C00u;
  const float2 lo = fp16 ? UnpackFp16::Pair(word_lo) : UnpackBf16::Pair(word_lo);
  const float2 hi = fp16 ? UnpackFp16::Pair(word_hi) : UnpackBf16::Pair(word_hi);
  if (FloatBits(lo.x) != FloatBits(x) || FloatBits(hi.y) != FloatBits(x)) {
    Count(mismatches, first, kWidenVector, h);
  }
  if (IsNan(x) != nan16) Count(mismatches, first, kNanTest, h);
  if (nan16) return;
  const uint32_t bin = fp16 ? CoarseOfFp16(h16) : CoarseOfBf16(h16);
  if (Coarse(x) != bin) Count(mismatches, first, kCoarseBin, h);
  // The next pattern in descending-key order (skipping NaN): its widened key
  // is strictly larger, except -0 right after +0 (equal). -0's successor is
  // the key after its raw pattern's (Key16 canonicalises -0 to +0's key).
  const uint32_t from = h16 == 0x8000u ? 0x8001u : Key16(h16) + 1u;
  for (uint32_t next = from; next <= 0xFFFFu; ++next) {
    const uint16_t g = BitsOfDescendingKey16(next);
    if (fp16 ? IsFp16Nan(g) : IsBf16Nan(g)) continue;
    const float y = view.Widen(g);
    const bool tie = h16 == 0u && g == 0x8000u;
    if (tie ? Key32(y) != Key32(x) : Key32(y) <= Key32(x)) Count(mismatches, first, kKeyOrder, h);
    break;
  }
  for (uint32_t b = 0; b < kCoarseBins; ++b) {
    const bool in = bin <= b;
    if ((x >= cut[b]) != in) Count(mismatches, first, kCutoffAdmits, h);
    if ((x >= cut[kCoarseBins + b]) != in) Count(mismatches, first, kCutoff16Admits, h);
  }
}

}  // namespace

cudaError_t LaunchScoreType16Check(int dtype, unsigned long long* mismatches, unsigned int* first,
                                   float* cutoffs, cudaStream_t stream) {
  CutoffKernel<<<kCoarseBins * 32 / 256, 256, 0, stream>>>(dtype, cutoffs, mismatches, first);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  ScoreType16CheckKernel<<<65536 / 256, 256, 0, stream>>>(dtype, cutoffs, mismatches, first);
  return cudaGetLastError();
}

cudaError_t LaunchHalfConversionCheck(unsigned long long* mismatches, unsigned int* first,
                                      cudaStream_t stream) {
  HalfConversionCheckKernel<<<1024, 256, 0, stream>>>(mismatches, first);
  return cudaGetLastError();
}

}  // namespace topk::cuda
