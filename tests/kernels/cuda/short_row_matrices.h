// The short-row test matrices both short-row suites share: every edge length
// around K and the bucket's width, both layouts, padding around every row.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "route_policies.h"
#include "topk/contract.h"
#include "topk/cuda_selector.h"
#include "topk/testing/generators.h"

namespace topk::cuda_test {

// The widest short-row bucket of the persistent kernel's exact route (one
// below the sampled route's crossover).
inline constexpr int64_t kShortT = topk::planner::kMinSampledLength - 1;

// Rows of lengths {0, 1, K-1, K, K+1, T-1, T} (clamped, K+1 <= T) and two
// random lengths in (K, T], width T (kShortT unless given). Pitched: pitch
// T + 1 (every row start alignment). Packed: rows at offsets that leave 1..3
// padding floats between them (any 4-byte alignment; any 2-byte alignment
// once rounded to a 16-bit type). Every float beyond a row's L holds
// `padding`.
inline testing::ScoreMatrix ShortRows(testing::Distribution d, int32_t k, Layout layout,
                                      float padding, uint64_t seed, int64_t width = kShortT) {
  std::vector<int64_t> lens = {0, 1, k - 1, k, k + 1, width - 1, width};
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 2; ++i) lens.push_back(k + 1 + static_cast<int64_t>(rng() % (width - k)));
  testing::ScoreMatrix m;
  m.layout = layout;
  m.rows = static_cast<int64_t>(lens.size());
  m.width = width;
  std::vector<int64_t> starts;
  if (layout == Layout::kPitched) {
    m.pitch = width + 1;
    for (int64_t r = 0; r < m.rows; ++r) starts.push_back(r * m.pitch);
    m.scores.assign(m.rows * m.pitch, padding);
  } else {
    int64_t off = 0;
    for (int64_t r = 0; r < m.rows; ++r) {
      starts.push_back(off);
      off += std::max<int64_t>(lens[r], 0) + 1 + r % 3;
    }
    m.row_offsets = starts;
    m.scores.assign(off, padding);
  }
  for (int64_t r = 0; r < m.rows; ++r) {
    const int64_t L = std::clamp<int64_t>(lens[r], 0, width);
    m.lengths.push_back(static_cast<int32_t>(L));
    testing::FillRow(d, seed, r, m.scores.data() + starts[r], L);
  }
  return m;
}

// The same rows rounded to `dtype` (padding too; kSubnormals keeps the type's
// own subnormals).
inline testing::ScoreMatrix ShortRowsOf(ScoreType dtype, testing::Distribution d, int32_t k,
                                        Layout layout, float padding, uint64_t seed,
                                        int64_t width = kShortT) {
  return testing::NarrowTo(ShortRows(d, k, layout, padding, seed, width), dtype,
                           d == testing::Distribution::kSubnormals);
}

}  // namespace topk::cuda_test
