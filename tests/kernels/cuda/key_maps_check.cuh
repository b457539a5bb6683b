// Device-side check of the key maps: the GPU's hardware FP16 conversion
// against the software definition in keys.h, over every FP32 bit pattern; and
// the 16-bit kernels' row view over every BF16 and FP16 pattern.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace topk::cuda {

// Counts the FP32 bit patterns whose HalfBitsRoundNearest (hardware on the
// device) differs from HalfBitsRoundNearestSoftware, or (not NaN) whose
// CoarseOfNumber or CoarsePairOfNumbers (in either place) differs from Coarse,
// and the smallest such pattern. Both outputs are device
// pointers; the caller zeroes *mismatches and sets *first to 0xFFFFFFFF before the launch.
cudaError_t LaunchHalfConversionCheck(unsigned long long* mismatches, unsigned int* first,
                                      cudaStream_t stream);

// What LaunchScoreType16Check compares, one counter each.
enum ScoreType16Check : int {
  kWidenScalar = 0,   // the row view's scalar widening == keys.h's software widening (bits)
  kWidenVector,       // the 16-byte loads' pair unpacking == the scalar widening
  kNanTest,           // IsNan(widened) == the type's own NaN test
  kCoarseBin,         // Coarse(widened) == CoarseOfBf16 / CoarseOfFp16 (non-NaN)
  kKeyOrder,          // Key32(widened) strictly increases with Key16 (-0 ties +0)
  kCutoffAdmits,      // widened >= WarpCoarseCutoff(b) <=> coarse bin <= b, every b
  kCutoff16Admits,    // the same for the 16-bit cutoff patterns of keys.h, widened
  kClosedFormCutoff,  // CoarseCutoffClosedForm(b) == WarpCoarseCutoff(b) (bits; "pattern": b)
  kNumScoreType16Checks
};

// Runs every ScoreType16Check over all 2^16 patterns of dtype (1: BF16,
// 2: FP16; topk::ScoreType). mismatches and first: kNumScoreType16Checks
// device counters each (zeroed / 0xFFFFFFFF by the caller); cutoffs: 4096
// device floats of scratch.
cudaError_t LaunchScoreType16Check(int dtype, unsigned long long* mismatches, unsigned int* first,
                                   float* cutoffs, cudaStream_t stream);

}  // namespace topk::cuda
