// Named constants of the sample-guided algorithm (docs/design.md section 2), after the
// paper's symbols. Shared by the CPU and CUDA selectors and by the generators
// that must know which positions a row's strided view reads.
#pragma once

#include <cstdint>

#include "topk/keys.h"

namespace topk {

// s: the proposal reads every s-th position of a row.
inline constexpr int32_t kSampleStride = 64;

// Proposal margins as ratios of the expected sample count K / s:
// q0 = ceil(1.5 K / s) picks tau0, q1 = ceil(1.75 K / s) picks tau1.
inline constexpr double kProposalMargin = 1.5;
inline constexpr double kRescueMargin = 1.75;

// pi_s(r mod s) = (r * kPhaseMultiplier) mod s. Odd, so it is a permutation of
// the residues for any power-of-two s: every block of s rows uses each phase once.
inline constexpr int64_t kPhaseMultiplier = 37;

// CPU: rows shorter than this skip the proposal and take exact coarse
// recovery directly. Measured (bench/NOTES.md, CPU section): with the F16C
// coarse histogram the two routes tie at N = 2048 and the sampled one wins
// from 4096 on for K = 64..2048; the usable-view test (view >= q1) gates the
// rest. The GPU picks its own crossover.
inline constexpr int64_t kMinSampledWidth = 4096;

// q = ceil(margin * K / s), in integers: margins are multiples of 1/4.
TOPK_HD int64_t SampleQuota(int32_t k, int32_t stride, double margin) {
  const int64_t quarters = static_cast<int64_t>(margin * 4.0 + 0.5);
  const int64_t numerator = quarters * k;
  const int64_t denominator = 4LL * stride;
  return (numerator + denominator - 1) / denominator;
}
TOPK_HD int64_t ProposalQuota(int32_t k, int32_t stride) {
  return SampleQuota(k, stride, kProposalMargin);
}
TOPK_HD int64_t RescueQuota(int32_t k, int32_t stride) {
  return SampleQuota(k, stride, kRescueMargin);
}

// a_r: the first position of row r's strided view (positions i = a_r mod s).
TOPK_HD int32_t SamplePhase(int64_t row, int32_t stride) {
  return static_cast<int32_t>((row * kPhaseMultiplier) % stride);
}

// Number of view positions of a row of `length` values: |{i < length : i = a mod s}|.
TOPK_HD int64_t ViewSize(int64_t length, int32_t phase, int32_t stride) {
  return length > phase ? (length - phase + stride - 1) / stride : 0;
}

}  // namespace topk
