// Coarse-key histogram of a contiguous run of floats: the hot loop of exact
// coarse recovery. Bit-identical to counting Coarse(x) one by one, except that
// every NaN (either sign) is counted in bin 15, outside the non-NaN range
// [kCoarseOfPlusInf, kCoarseOfMinusInf], as Coarse does for positive NaN.
#pragma once

#include <cstdint>

namespace topk::cpu {

// Adds the coarse bins of x[0, n) to histogram (kCoarseBins entries).
void AddCoarseHistogram(const float* x, int64_t n, uint32_t* histogram);

// The portable one-at-a-time version (also the reference in tests).
void AddCoarseHistogramScalar(const float* x, int64_t n, uint32_t* histogram);

}  // namespace topk::cpu
