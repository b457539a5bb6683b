// Named constants of the sample-guided algorithm (docs/design.md section 2), after the
// paper's symbols. Shared by the CPU and CUDA selectors and by the generators
// that must know which positions a row's strided view reads.
#pragma once

#include <cmath>
#include <cstdint>

#include "topk/keys.h"

namespace topk {

// s: the proposal reads every s-th position of a row.
inline constexpr int32_t kSampleStride = 64;

// Proposal margins. The expected number of view samples among a row's top K
// is mu = K / s; the quotas q0 (picks tau0) and q1 (picks tau1) stand above it
// by a ratio and by a number of standard deviations of that count (about
// sqrt(mu)), whichever is larger: q = max(ceil(margin mu), ceil(mu + z sqrt(mu))).
// The ratios (1.5, 1.75) bind from K = 2048 at s = 64 (mu = 32: q0 = 48,
// q1 = 56); below it the count's spread is a larger share of mu, and ratio
// quotas underfill too often (K = 512: mu = 8, q0 = 12 = mu + 1.4 sd, 5 % of
// indexer rows rescued and 2 % re-run exactly, measured on the H200), so the
// deviations bind (q0 = 16, q1 = 20 at K = 512; bench/NOTES.md, "Selector IV").
inline constexpr double kProposalMargin = 1.5;
inline constexpr double kRescueMargin = 1.75;
inline constexpr double kProposalDeviations = 2.75;
inline constexpr double kRescueDeviations = 4.2;

// pi_s(r mod s) = (r * kPhaseMultiplier) mod s. Odd, so it is a permutation of
// the residues for any power-of-two s: every block of s rows uses each phase once.
inline constexpr int64_t kPhaseMultiplier = 37;

// CPU: rows shorter than this skip the proposal and take exact coarse
// recovery directly. Measured (bench/NOTES.md, CPU section): with the F16C
// coarse histogram the two routes tie at N = 2048 and the sampled one wins
// from 4096 on for K = 64..2048; the usable-view test (view >= q1) gates the
// rest. The GPU picks its own crossover.
inline constexpr int64_t kMinSampledWidth = 4096;

// q = max(ceil(margin * K / s), ceil(K / s + deviations * sqrt(K / s))); the
// ratio term in integers (margins are multiples of 1/4).
TOPK_HD int64_t SampleQuota(int32_t k, int32_t stride, double margin, double deviations) {
  const int64_t quarters = static_cast<int64_t>(margin * 4.0 + 0.5);
  const int64_t numerator = quarters * k;
  const int64_t denominator = 4LL * stride;
  const int64_t by_ratio = (numerator + denominator - 1) / denominator;
  const double mu = static_cast<double>(k) / stride;
  const int64_t by_spread = static_cast<int64_t>(ceil(mu + deviations * sqrt(mu)));
  return by_ratio > by_spread ? by_ratio : by_spread;
}
TOPK_HD int64_t ProposalQuota(int32_t k, int32_t stride) {
  return SampleQuota(k, stride, kProposalMargin, kProposalDeviations);
}
TOPK_HD int64_t RescueQuota(int32_t k, int32_t stride) {
  return SampleQuota(k, stride, kRescueMargin, kRescueDeviations);
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
