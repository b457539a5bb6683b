// Seeded score generators (docs/design.md section 9). Every value is a pure function
// of (seed, row, distribution, position), so any backend can rebuild a row.
#include "topk/testing/generators.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "topk/algorithm_constants.h"
#include "topk/keys.h"
#include "topk/testing/score_types.h"

namespace topk::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(Mix(seed)) {}
  uint64_t Next() {
    state_ += 0x9E3779B97F4A7C15ull;
    return Mix(state_);
  }
  float Uniform01() { return static_cast<float>(Next() >> 40) * 0x1.0p-24f; }  // [0, 1)
  float Uniform(float lo, float hi) { return lo + (hi - lo) * Uniform01(); }
  float Normal() {
    const double u1 = (static_cast<double>(Next() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = static_cast<double>(Next() >> 11) * 0x1.0p-53;
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }

 private:
  uint64_t state_;
};

uint64_t RowSeed(uint64_t seed, int64_t row, Distribution d) {
  return Mix(seed ^
             Mix(static_cast<uint64_t>(row) * 0x100000001B3ull + static_cast<uint64_t>(d) + 1));
}

float RoundToBf16(float x) {
  if (IsNan(x)) return x;
  uint32_t u = FloatBits(x);
  u += 0x7FFFu + ((u >> 16) & 1u);  // nearest even; finite overflow rounds to inf
  return BitsToFloat(u & 0xFFFF0000u);
}

// FP8 e4m3 (bias 7, 3 mantissa bits, max 448, no inf): nearest, saturating.
float RoundToFp8E4M3(float x) {
  if (IsNan(x) || x == 0.0f) return x;
  const float a = std::min(std::fabs(x), 448.0f);
  int exponent;
  std::frexp(a, &exponent);                         // a = m * 2^exponent, m in [0.5, 1)
  const int step_exp = std::max(exponent - 4, -9);  // 4 significant bits; subnormal step 2^-9
  const float step = std::ldexp(1.0f, step_exp);
  const float rounded = std::min(std::nearbyint(a / step) * step, 448.0f);
  return std::copysign(rounded, x);
}

// sum_j w_j * relu(q_j . k_i) with k_i = A[a_i] + B[b_i] drawn from two small
// key pools, so each position costs a hash and kHeads adds: fast enough for
// 1M-wide rows, and the P^2 key combinations keep the values varied. Keys are
// shared by all rows of a seed (one sequence), queries are per row.
void FillIndexer(uint64_t seed, int64_t row, float* values, int64_t length) {
  constexpr int kHeads = 4;
  constexpr int kDim = 16;
  int64_t pool = 16;
  while (pool < 1024 && pool * pool < 4 * length) pool *= 2;
  Rng key_rng(Mix(seed ^ 0x6B65797300000000ull));
  Rng query_rng(RowSeed(seed, row, Distribution::kIndexer));
  std::array<std::array<float, kDim>, kHeads> query;
  std::array<float, kHeads> weight;
  for (int j = 0; j < kHeads; ++j) {
    weight[j] = query_rng.Uniform(0.25f, 1.0f);
    for (float& q : query[j]) q = query_rng.Normal();
  }
  // dot[j][p] = q_j . pool_key[p] for both pools (A then B).
  std::vector<float> dot(2 * pool * kHeads);
  std::array<float, kDim> key;
  for (int64_t p = 0; p < 2 * pool; ++p) {
    for (float& c : key) c = key_rng.Uniform(-0.6f, 0.6f);
    for (int j = 0; j < kHeads; ++j) {
      float acc = 0.0f;
      for (int c = 0; c < kDim; ++c) acc += query[j][c] * key[c];
      dot[p * kHeads + j] = acc;
    }
  }
  const uint64_t position_salt = Mix(seed ^ 0x706F730000000000ull);
  const int64_t mask = pool - 1;
  for (int64_t i = 0; i < length; ++i) {
    const uint64_t h = Mix(position_salt + static_cast<uint64_t>(i));
    const float* da = &dot[(h & mask) * kHeads];
    const float* db = &dot[(pool + ((h >> 32) & mask)) * kHeads];
    float score = 0.0f;
    for (int j = 0; j < kHeads; ++j) score += weight[j] * std::max(da[j] + db[j], 0.0f);
    values[i] = score;
  }
  // Attention sinks at the first positions, recency ramp at the end.
  for (int64_t i = 0; i < std::min<int64_t>(length, 4); ++i) values[i] += 12.0f - 2.0f * i;
  const int64_t window = std::min<int64_t>(length, 256);
  for (int64_t t = 0; t < window; ++t) {
    values[length - 1 - t] += 6.0f * static_cast<float>(window - t) / window;
  }
}

// The strided view of this row reads positions i = a mod s. View positions
// hold values spread over ~900 coarse bins; every other position keeps such a
// value only with probability p and is small otherwise. The view therefore
// over-represents the large values by s / (1 + (s - 1) p), the proposal's tau0
// (and often tau1) admit fewer than K values, and the band rescue (p = 0.6:
// 1.5/s * (1 + 63p) K < K < 1.75/s * ...) or the exact recovery (p = 0.25) runs.
void FillStridePeriodic(uint64_t seed, int64_t row, float* values, int64_t length, int32_t stride) {
  Rng rng(RowSeed(seed, row, Distribution::kStridePeriodic));
  const int32_t stride_clamped = std::max(stride, 1);
  const int64_t phase = SamplePhase(row, stride_clamped);
  const float keep = (row % 2 == 0) ? 0.25f : 0.6f;
  for (int64_t i = 0; i < length; ++i) {
    const float large = std::exp2(28.0f * rng.Uniform01() - 13.0f);
    const bool in_view = (i % stride_clamped) == phase;
    const bool kept = rng.Uniform01() < keep;
    values[i] = (in_view || kept) ? large : rng.Uniform(0.0f, 0x1.0p-14f);
  }
}

}  // namespace

std::string_view DistributionName(Distribution d) {
  switch (d) {
    case Distribution::kUniform:
      return "uniform";
    case Distribution::kNormal:
      return "normal";
    case Distribution::kIndexer:
      return "indexer";
    case Distribution::kBf16Ties:
      return "bf16_ties";
    case Distribution::kFp8Ties:
      return "fp8_ties";
    case Distribution::kConstant:
      return "constant";
    case Distribution::kAllMinusInf:
      return "all_minus_inf";
    case Distribution::kInfMix:
      return "inf_mix";
    case Distribution::kSubnormals:
      return "subnormals";
    case Distribution::kSignedZeros:
      return "signed_zeros";
    case Distribution::kOneBinCluster:
      return "one_bin_cluster";
    case Distribution::kStridePeriodic:
      return "stride_periodic";
  }
  return "unknown";
}

void FillRow(Distribution d, uint64_t seed, int64_t row, float* values, int64_t length,
             int32_t sample_stride) {
  if (length <= 0) return;
  Rng rng(RowSeed(seed, row, d));
  switch (d) {
    case Distribution::kUniform:
      for (int64_t i = 0; i < length; ++i) values[i] = rng.Uniform(-1.0f, 1.0f);
      return;
    case Distribution::kNormal:
      for (int64_t i = 0; i < length; ++i) values[i] = rng.Normal();
      return;
    case Distribution::kIndexer:
      FillIndexer(seed, row, values, length);
      return;
    case Distribution::kBf16Ties:
      FillIndexer(seed, row, values, length);
      for (int64_t i = 0; i < length; ++i) values[i] = RoundToBf16(values[i]);
      return;
    case Distribution::kFp8Ties:
      FillIndexer(seed, row, values, length);
      for (int64_t i = 0; i < length; ++i) values[i] = RoundToFp8E4M3(values[i]);
      return;
    case Distribution::kConstant:
      std::fill(values, values + length, rng.Uniform(-4.0f, 4.0f));
      return;
    case Distribution::kAllMinusInf:
      std::fill(values, values + length, -kInf);
      return;
    case Distribution::kInfMix:
      for (int64_t i = 0; i < length; ++i) {
        const float u = rng.Uniform01();
        values[i] = u < 0.1f ? kInf : (u < 0.2f ? -kInf : rng.Uniform(-1.0f, 1.0f));
      }
      return;
    case Distribution::kSubnormals:
      for (int64_t i = 0; i < length; ++i) {
        const uint64_t bits = rng.Next();
        const uint32_t sign = (bits & 1u) ? 0x80000000u : 0u;
        const uint32_t mantissa = (bits % 10 == 0) ? 0u : static_cast<uint32_t>(bits >> 41);
        values[i] = BitsToFloat(sign | mantissa);  // 23-bit mantissa, zero exponent
      }
      return;
    case Distribution::kSignedZeros:
      for (int64_t i = 0; i < length; ++i) {
        const float u = rng.Uniform01();
        values[i] =
            u < 0.4f
                ? -0.0f
                : (u < 0.8f ? 0.0f
                            : (u < 0.9f ? rng.Uniform(0.0f, 1e-3f) : -rng.Uniform(0.0f, 1.0f)));
      }
      return;
    case Distribution::kOneBinCluster:
      // FP16 bin [1, 1 + 31/1024] (5 mantissa bits kept); stay clear of its rounding edges.
      for (int64_t i = 0; i < length; ++i) values[i] = rng.Uniform(1.001f, 1.029f);
      return;
    case Distribution::kStridePeriodic:
      FillStridePeriodic(seed, row, values, length, sample_stride);
      return;
  }
}

RowBatch ScoreMatrix::batch() const {
  RowBatch b;
  b.dtype = dtype;
  if (dtype == ScoreType::kFloat32) {
    b.scores = scores.data();
  } else {
    b.scores16 = scores16.data();
  }
  b.layout = layout;
  b.pitch = pitch;
  b.row_offsets = layout == Layout::kPacked ? row_offsets.data() : nullptr;
  b.lengths = lengths.data();
  b.num_rows = rows;
  b.width = width;
  return b;
}

namespace {

std::vector<int32_t> MakeLengths(const GeneratorSpec& spec) {
  std::vector<int32_t> lengths(spec.rows);
  Rng rng(Mix(spec.seed ^ 0x6C656E0000000000ull));
  const int64_t width = spec.width;
  const int64_t edges[] = {0, 1, spec.k - 1LL, spec.k, spec.k + 1LL, width};
  for (int64_t r = 0; r < spec.rows; ++r) {
    int64_t length = width;
    switch (spec.lengths) {
      case LengthPattern::kFull:
        break;
      case LengthPattern::kCausalTerminal:
        length = width - spec.rows + 1 + r;
        break;
      case LengthPattern::kRandom:
        length = static_cast<int64_t>(rng.Next() % static_cast<uint64_t>(width + 1));
        break;
      case LengthPattern::kEdges:
        length = edges[r % 6];
        break;
    }
    lengths[r] = static_cast<int32_t>(std::clamp<int64_t>(length, 0, width));
  }
  return lengths;
}

// Rounds the FP32 matrix into the 16-bit type. FP32 subnormals would all
// round to FP16 zeros, so kSubnormals keeps each value's sign and the top
// bits of its mantissa as the type's own subnormal (zero stays zero).
void NarrowMatrix(ScoreType dtype, bool subnormals, ScoreMatrix& m) {
  m.dtype = dtype;
  m.scores16.resize(m.scores.size());
  const int mantissa_shift = dtype == ScoreType::kBFloat16 ? 16 : 13;
  for (size_t i = 0; i < m.scores.size(); ++i) {
    const uint32_t bits = FloatBits(m.scores[i]);
    const bool subnormal = (bits & 0x7F800000u) == 0;
    m.scores16[i] = subnormals && subnormal
                        ? static_cast<uint16_t>(((bits >> 16) & 0x8000u) |
                                                ((bits & 0x7FFFFFu) >> mantissa_shift))
                        : NarrowScore(m.scores[i], dtype);
  }
  m.scores.clear();
  m.scores.shrink_to_fit();
}

}  // namespace

ScoreMatrix Generate(const GeneratorSpec& spec) {
  ScoreMatrix m;
  m.layout = spec.layout;
  m.rows = std::max<int64_t>(spec.rows, 0);
  m.width = std::max<int64_t>(spec.width, 0);
  GeneratorSpec s = spec;
  s.rows = m.rows;
  s.width = m.width;
  m.lengths = MakeLengths(s);
  if (spec.layout == Layout::kPitched) {
    m.pitch = spec.pitch > 0 ? std::max(spec.pitch, m.width) : m.width;
    m.scores.assign(m.rows * m.pitch, spec.padding);
    for (int64_t r = 0; r < m.rows; ++r) {
      FillRow(spec.distribution, spec.seed, r, m.scores.data() + r * m.pitch, m.lengths[r],
              spec.sample_stride);
    }
  } else {
    // Rows back to back with 0..2 padding values between them: row starts are
    // unaligned and a read past L_r meets spec.padding.
    m.row_offsets.resize(m.rows);
    int64_t offset = 0;
    for (int64_t r = 0; r < m.rows; ++r) {
      m.row_offsets[r] = offset;
      offset += m.lengths[r] + r % 3;
    }
    m.scores.assign(offset + 4, spec.padding);
    for (int64_t r = 0; r < m.rows; ++r) {
      FillRow(spec.distribution, spec.seed, r, m.scores.data() + m.row_offsets[r], m.lengths[r],
              spec.sample_stride);
    }
  }
  if (spec.dtype != ScoreType::kFloat32) {
    NarrowMatrix(spec.dtype, spec.distribution == Distribution::kSubnormals, m);
  }
  return m;
}

ScoreMatrix NarrowTo(ScoreMatrix m, ScoreType dtype, bool keep_subnormals) {
  if (dtype != ScoreType::kFloat32 && m.dtype == ScoreType::kFloat32) {
    NarrowMatrix(dtype, keep_subnormals, m);
  }
  return m;
}

}  // namespace topk::testing
