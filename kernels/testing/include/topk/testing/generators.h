// Seeded, reproducible score generators shared by tests and benchmarks
// (docs/design.md section 9). Never zeros: every generator draws real data.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "topk/contract.h"

namespace topk::testing {

enum class Distribution : uint8_t {
  kUniform,         // U(-1, 1)
  kNormal,          // N(0, 1)
  kIndexer,         // sum_j w_j * relu(q_j . k_i), attention-sink and recency structure
  kBf16Ties,        // indexer-like, rounded to BF16: heavy ties
  kFp8Ties,         // indexer-like, rounded to FP8 e4m3: very heavy ties
  kConstant,        // one value repeated
  kAllMinusInf,     // every value -inf
  kInfMix,          // +inf, -inf and finite values mixed
  kSubnormals,      // subnormal magnitudes of both signs, with zeros
  kSignedZeros,     // -0.0 and +0.0 mixed with a few other values
  kOneBinCluster,   // all values inside one coarse (FP16) bin
  kStridePeriodic,  // the stride-s view of the row over-represents its large values (off-view
                    // positions keep them only with probability 0.25 / 0.6 by row parity), so
                    // tau0 underfills and the band rescue / exact recovery run (docs/algorithm.md)
};

inline constexpr Distribution kAllDistributions[] = {
    Distribution::kUniform,     Distribution::kNormal,        Distribution::kIndexer,
    Distribution::kBf16Ties,    Distribution::kFp8Ties,       Distribution::kConstant,
    Distribution::kAllMinusInf, Distribution::kInfMix,        Distribution::kSubnormals,
    Distribution::kSignedZeros, Distribution::kOneBinCluster, Distribution::kStridePeriodic,
};

std::string_view DistributionName(Distribution d);

enum class LengthPattern : uint8_t {
  kFull,            // every L_r = width
  kCausalTerminal,  // the last M prefix lengths ending at width: L_r = width - M + 1 + r
  kRandom,          // uniform in [0, width]
  kEdges,           // cycles through {0, 1, K-1, K, K+1, width} (clamped to [0, width])
};

struct GeneratorSpec {
  Distribution distribution = Distribution::kIndexer;
  LengthPattern lengths = LengthPattern::kFull;
  int64_t rows = 1;
  int64_t width = 1;
  int32_t k = 2048;  // used by LengthPattern::kEdges
  Layout layout = Layout::kPitched;
  int64_t pitch = 0;  // kPitched: 0 means width
  uint64_t seed = 1;
  // Values written beyond each row's valid prefix (pitched padding), to prove
  // they are ignored; NaN and huge values are both useful here.
  float padding = 1e9f;
  int32_t sample_stride = 64;  // kStridePeriodic: the stride whose view is fooled
  // kBFloat16 / kFloat16: the FP32 rows (padding too) rounded to the type,
  // nearest even. Rounding multiplies ties (BF16 keeps 8 significant bits);
  // kSubnormals draws the type's own subnormals instead, which FP32's would
  // round to zero.
  ScoreType dtype = ScoreType::kFloat32;
};

// A host score matrix plus the lengths/offsets a RowBatch points at.
struct ScoreMatrix {
  std::vector<float> scores;       // kFloat32
  std::vector<uint16_t> scores16;  // kBFloat16 / kFloat16 (then `scores` is empty)
  ScoreType dtype = ScoreType::kFloat32;
  std::vector<int32_t> lengths;
  std::vector<int64_t> row_offsets;  // kPacked only
  Layout layout = Layout::kPitched;
  int64_t rows = 0;
  int64_t width = 0;
  int64_t pitch = 0;

  RowBatch batch() const;  // points into this object: keep it alive
};

ScoreMatrix Generate(const GeneratorSpec& spec);

// An FP32 matrix (built or edited by hand) rounded into `dtype` the way
// Generate rounds spec.dtype rows, padding included; keep_subnormals: FP32
// subnormals become the type's own (as for kSubnormals) instead of rounding
// (to zero in FP16). A 16-bit matrix or dtype kFloat32: returned unchanged.
ScoreMatrix NarrowTo(ScoreMatrix m, ScoreType dtype, bool keep_subnormals = false);

// Fills one row of `length` values of a distribution (used by Generate and by
// callers that lay out memory themselves, e.g. device buffers).
void FillRow(Distribution d, uint64_t seed, int64_t row, float* values, int64_t length,
             int32_t sample_stride = 64);

}  // namespace topk::testing
