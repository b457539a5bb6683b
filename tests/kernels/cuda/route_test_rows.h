// Rows and checks the route suites share (the short-row route, the
// persistent kernel's exact route on short rows, the cluster and resident
// routes): an answer against the reference or row by row, infinity floods,
// one-bin boundaries, the edge-length sweep, and the short-row suites'
// fixture with its NaN and bad-length rows.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "selector_fixture.h"
#include "short_row_matrices.h"
#include "topk/keys.h"

namespace topk::cuda_test {

// The value `steps` representable floats above x.
inline float FloatsAbove(float x, int steps) {
  for (int i = 0; i < steps; ++i) x = std::nextafter(x, std::numeric_limits<float>::infinity());
  return x;
}

// A run's answer (out, status) against the verifier and the reference: every
// row's status equal, and the rows whose answer is unique (L <= K, or
// deterministic mode) bit-identical. The caller checks HasFatalFailure().
inline void ExpectReferenceAnswer(const ScoreMatrix& m, int32_t k, const SelectOptions& o,
                                  const std::vector<int32_t>& out,
                                  const std::vector<RowStatus>& status, const std::string& what) {
  ASSERT_OK(testing::VerifySelection(m.batch(), k, o, out.data(), status.data()));
  std::vector<int32_t> ref(out.size());
  std::vector<RowStatus> ref_status(m.rows);
  ASSERT_OK(testing::ReferenceSelect(m.batch(), k, o, OutputView{ref.data(), ref_status.data()}));
  for (int64_t r = 0; r < m.rows; ++r) {
    ASSERT_EQ(status[r], ref_status[r]) << what << " row " << r;
    if (o.deterministic || m.lengths[r] <= k) {
      ASSERT_EQ(0, std::memcmp(ref.data() + r * k, out.data() + r * k, k * 4))
          << what << ": row " << r << " (L " << m.lengths[r] << ") differs";
    }
  }
}

// Every generator, K in {1, 100, 2048, 4096}, both layouts and the four modes
// over rows of 70001 (segments end off the 16-byte grid) with the edge lengths
// {0, 1, K-1, K, K+1, width}: check(spec, k, options, what) for each; it
// returns false to stop (a fatal failure).
template <typename Check>
void ForEachEdgeLengthCase(uint64_t seed, Check&& check) {
  for (Distribution d : testing::kAllDistributions) {
    for (int32_t k : {1, 100, 2048, 4096}) {
      for (Layout layout : {Layout::kPitched, Layout::kPacked}) {
        for (int mode = 0; mode < 4; ++mode) {
          GeneratorSpec spec;
          spec.distribution = d;
          spec.rows = 7;
          spec.width = 70001;
          spec.k = k;
          spec.layout = layout;
          spec.lengths = LengthPattern::kEdges;
          spec.padding = (mode & 1) ? std::numeric_limits<float>::quiet_NaN() : 1e9f;
          spec.seed = ++seed;
          SelectOptions o;
          o.sorted = mode & 1;
          o.deterministic = mode & 2;
          const std::string what = std::string(testing::DistributionName(d)) +
                                   " k=" + std::to_string(k) +
                                   (layout == Layout::kPacked ? " packed" : " pitched") + " mode " +
                                   std::to_string(mode);
          if (!check(spec, k, o, what)) return;
        }
      }
    }
  }
}

// The K-th value inside one coarse bin that holds `in_bin` distinct values
// (row 1: 20-way ties), with 300 values at the bottom of the bin above (they
// share the bin's leading key bits) and the rest of the row far below.
inline ScoreMatrix BoundaryInOneBinRows(int in_bin, int64_t width) {
  const float base = 0.7f;
  const float above_start = CoarseCutoff(Coarse(base) - 1);
  ScoreMatrix m;
  m.rows = 2;
  m.width = width;
  m.pitch = width;
  m.scores.assign(m.rows * width, -5.f);
  std::mt19937_64 rng(in_bin);
  for (int64_t r = 0; r < m.rows; ++r) {
    std::vector<float> row(width, -5.f);
    for (int i = 0; i < 300; ++i) row[i] = FloatsAbove(above_start, i);
    for (int i = 0; i < in_bin; ++i) row[300 + i] = FloatsAbove(base, r == 0 ? i : i / 20);
    std::normal_distribution<float> normal(-3.f, 0.5f);
    for (int64_t i = 300 + in_bin; i < width; ++i) row[i] = std::min(normal(rng), -1.f);
    std::shuffle(row.begin(), row.end(), rng);
    std::copy(row.begin(), row.end(), m.scores.begin() + r * width);
  }
  m.lengths.assign(m.rows, static_cast<int32_t>(width));
  return m;
}

// FP32 rows of `width` normal values (seeded), each value drawing u uniform in
// [0, width): row 0 is +inf where u < 3000 (the K-th value of K <= ~3000 is
// +inf), row 1 -inf where u < width - 1000 (the K-th of K > ~1000 is -inf),
// row 2 +inf where u < 1000 and -inf where 1000 <= u < minus_inf_end (the K-th
// finite between them), row 3 all -inf; rows from 4 on stay normal.
inline ScoreMatrix InfinityFloodRows(int64_t rows, int64_t width, uint64_t seed,
                                     uint64_t minus_inf_end) {
  const float inf = std::numeric_limits<float>::infinity();
  ScoreMatrix m;
  m.rows = rows;
  m.width = width;
  m.pitch = width;
  m.scores.assign(m.rows * width, 0.f);
  m.lengths.assign(m.rows, static_cast<int32_t>(width));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  const uint64_t w = static_cast<uint64_t>(width);
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t i = 0; i < width; ++i) {
      float x = normal(rng);
      const uint64_t u = rng() % w;
      if (r == 0 && u < 3000) x = inf;
      if (r == 1 && u < w - 1000) x = -inf;
      if (r == 2) x = u < 1000 ? inf : (u < minus_inf_end ? -inf : x);
      if (r == 3) x = -inf;
      m.scores[r * width + i] = x;
    }
  }
  return m;
}

// InfinityFloodRows' nine rows of `width` (100000 or more) with a NaN in row
// 4's body, row 5 at L = 1500 <= K = 2048 with a NaN at its end, row 6 at
// 90000 with a NaN just beyond (ignored); rows 7 and 8 keep full lengths
// (SetBadLengths makes them -3 and width + 1). FP32, typed by the caller.
inline ScoreMatrix FloodAndNanRows(int64_t width, uint64_t seed) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  ScoreMatrix m = InfinityFloodRows(9, width, seed, 60000);
  m.scores[4 * width + 77777] = nan;
  m.lengths[5] = 1500;
  m.scores[5 * width + 1499] = nan;
  m.lengths[6] = 90000;
  m.scores[6 * width + 90000] = nan;
  return m;
}
inline void SetBadLengths(ScoreMatrix& m) {
  m.lengths[7] = -3;
  m.lengths[8] = static_cast<int32_t>(m.width + 1);
}
// FloodAndNanRows' statuses at K = 2048 after SetBadLengths.
inline const std::vector<RowStatus> kFloodAndNanStatuses = {
    RowStatus::kOk,  RowStatus::kOk, RowStatus::kOk,        RowStatus::kOk,       RowStatus::kNan,
    RowStatus::kNan, RowStatus::kOk, RowStatus::kBadLength, RowStatus::kBadLength};

// Each row of a run's answer alone: its status is want[r]; a row that is not
// kOk holds -1 in all K slots, a kOk row passes the verifier. The caller
// checks HasFatalFailure().
inline void ExpectEachRow(const ScoreMatrix& m, int32_t k, const std::vector<RowStatus>& want,
                          const std::vector<int32_t>& out, const std::vector<RowStatus>& status) {
  ASSERT_EQ(static_cast<int64_t>(want.size()), m.rows);
  for (int64_t r = 0; r < m.rows; ++r) {
    ASSERT_EQ(status[r], want[r]) << "row " << r;
    if (want[r] != RowStatus::kOk) {
      for (int i = 0; i < k; ++i) ASSERT_EQ(out[r * k + i], -1) << "row " << r;
    } else {
      ASSERT_OK(
          testing::VerifySelection(OneRow(m, r), k, {}, out.data() + r * k, status.data() + r));
    }
  }
}

// The fixture of the two short-row suites (the short-row route and the
// persistent kernel's exact route on short rows).
class ShortRowSuiteTest : public CudaSelectorTest {
 protected:
  // ShortRowsOf's nine rows (lengths {0, 1, K-1, K, K+1, T-1, T, rand, rand},
  // K = 512) with a NaN in the L <= K row 2, at row 4's first value (head
  // scalar or body), at the last value of row 5 (L = T-1: the tail), in row
  // 6's body and just beyond row 7's L (ignored), row 3's length -1 and row
  // 8's T+1 (> width), through `sel`, which must plan `route`: every status,
  // NaN and bad-length rows empty, rows 0 (L = 0) and 1 (L = 1) exact.
  void CheckNanAndBadLengthRows(CudaSelector& sel, Route route) {
    const int32_t k = 512;
    ScoreMatrix m = ShortRowsOf(Dtype(), Distribution::kIndexer, k, Layout::kPitched, 1e9f, 3);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    SetScore(m, 2 * m.pitch + k - 2, nan);
    SetScore(m, 4 * m.pitch + 0, nan);
    SetScore(m, 5 * m.pitch + kShortT - 2, nan);
    SetScore(m, 6 * m.pitch + 7000, nan);
    SetScore(m, 7 * m.pitch + m.lengths[7], nan);
    m.lengths[3] = -1;
    m.lengths[8] = static_cast<int32_t>(kShortT + 1);
    std::vector<int32_t> out;
    std::vector<RowStatus> status;
    Plan plan;
    RunOn(sel, m, k, {}, &out, &status, &plan);
    if (HasFatalFailure()) return;
    ASSERT_EQ(plan.route, route);
    ExpectEachRow(
        m, k,
        {RowStatus::kOk, RowStatus::kOk, RowStatus::kNan, RowStatus::kBadLength, RowStatus::kNan,
         RowStatus::kNan, RowStatus::kNan, RowStatus::kOk, RowStatus::kBadLength},
        out, status);
    if (HasFatalFailure()) return;
    EXPECT_EQ(out[0], -1);  // L = 0
    EXPECT_EQ(out[k], 0);   // L = 1
    EXPECT_EQ(out[k + 1], -1);
  }
};

}  // namespace topk::cuda_test
