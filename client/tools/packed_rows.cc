#include "packed_rows.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "topk/testing/verifier.h"

namespace topk::tools {
namespace {

constexpr char kMagic[8] = {'T', 'O', 'P', 'K', 'R', 'O', 'W', 'S'};
constexpr uint32_t kVersion = 1;

void Index(PackedRows& rows) {
  rows.offsets.resize(rows.lengths.size());
  int64_t offset = 0;
  rows.width = 0;
  for (size_t r = 0; r < rows.lengths.size(); ++r) {
    rows.offsets[r] = offset;
    offset += std::max(rows.lengths[r], 0);
    rows.width = std::max<int64_t>(rows.width, rows.lengths[r]);
  }
}

}  // namespace

static_assert(static_cast<int>(ScoreType::kBFloat16) == v1::SCORE_TYPE_BF16 &&
              static_cast<int>(ScoreType::kFloat16) == v1::SCORE_TYPE_FP16 &&
              static_cast<int>(ScoreType::kFloat32) == v1::SCORE_TYPE_FP32);

v1::ScoreType ToWire(ScoreType type) { return static_cast<v1::ScoreType>(type); }

absl::StatusOr<ScoreType> ParseScoreType(const std::string& name) {
  for (ScoreType type : kAllScoreTypes) {
    if (ScoreTypeName(type) == name) return type;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", name, "' (fp32, bf16, fp16)"));
}

client::Rows PackedRows::view() const {
  if (dtype != ScoreType::kFloat32) return client::HalfRows(ToWire(dtype), scores16, lengths);
  return {.scores = scores, .lengths = lengths};
}

RowBatch PackedRows::batch() const {
  const bool wide = dtype == ScoreType::kFloat32;
  return RowBatch{.scores = wide ? scores.data() : nullptr,
                  .layout = Layout::kPacked,
                  .row_offsets = offsets.data(),
                  .lengths = lengths.data(),
                  .num_rows = static_cast<int64_t>(lengths.size()),
                  .width = std::max<int64_t>(width, 1),
                  .dtype = dtype,
                  .scores16 = wide ? nullptr : scores16.data()};
}

PackedRows Pack(const testing::ScoreMatrix& matrix) {
  PackedRows out;
  out.lengths = matrix.lengths;
  out.dtype = matrix.dtype;
  const RowBatch batch = matrix.batch();
  int64_t total = 0;
  for (int32_t length : matrix.lengths) total += length;
  if (matrix.dtype == ScoreType::kFloat32) {
    out.scores.reserve(total);
    for (int64_t r = 0; r < matrix.rows; ++r) {
      const float* row = batch.row(r);
      out.scores.insert(out.scores.end(), row, row + matrix.lengths[r]);
    }
  } else {
    out.scores16.reserve(total);
    for (int64_t r = 0; r < matrix.rows; ++r) {
      const uint16_t* row = batch.row16(r);
      out.scores16.insert(out.scores16.end(), row, row + matrix.lengths[r]);
    }
  }
  Index(out);
  return out;
}

PackedRows Generate(const testing::GeneratorSpec& spec) {
  testing::GeneratorSpec pitched = spec;
  pitched.layout = Layout::kPitched;
  return Pack(testing::Generate(pitched));
}

PackedRows FromLengths(std::vector<float> scores, std::vector<int32_t> lengths) {
  PackedRows out;
  out.scores = std::move(scores);
  out.lengths = std::move(lengths);
  Index(out);
  return out;
}

absl::Status Save(const PackedRows& rows, const std::string& path) {
  if (rows.dtype != ScoreType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat("TOPKROWS files hold FP32 rows; these are ",
                                                   std::string(ScoreTypeName(rows.dtype))));
  }
  std::ofstream out(path, std::ios::binary);
  if (!out) return absl::NotFoundError(absl::StrCat("cannot write ", path));
  const int64_t n = static_cast<int64_t>(rows.lengths.size());
  out.write(kMagic, sizeof(kMagic));
  out.write(reinterpret_cast<const char*>(&kVersion), sizeof(kVersion));
  out.write(reinterpret_cast<const char*>(&n), sizeof(n));
  out.write(reinterpret_cast<const char*>(rows.lengths.data()), n * sizeof(int32_t));
  out.write(reinterpret_cast<const char*>(rows.scores.data()), rows.bytes());
  if (!out) return absl::DataLossError(absl::StrCat("short write to ", path));
  return absl::OkStatus();
}

absl::StatusOr<PackedRows> Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  char magic[8];
  uint32_t version = 0;
  int64_t n = 0;
  in.read(magic, sizeof(magic));
  in.read(reinterpret_cast<char*>(&version), sizeof(version));
  in.read(reinterpret_cast<char*>(&n), sizeof(n));
  if (!in || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0 || version != kVersion || n < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a TOPKROWS v1 file"));
  }
  std::vector<int32_t> lengths(n);
  in.read(reinterpret_cast<char*>(lengths.data()), n * sizeof(int32_t));
  int64_t total = 0;
  for (int32_t length : lengths) {
    if (length < 0) return absl::InvalidArgumentError(absl::StrCat(path, ": negative length"));
    total += length;
  }
  std::vector<float> scores(total);
  in.read(reinterpret_cast<char*>(scores.data()), total * sizeof(float));
  if (!in) return absl::DataLossError(absl::StrCat(path, ": truncated"));
  return FromLengths(std::move(scores), std::move(lengths));
}

absl::Status Verify(const PackedRows& rows, int32_t k, const SelectOptions& options,
                    const client::SelectResult& result) {
  if (result.num_rows != static_cast<int64_t>(rows.lengths.size()) || result.k != k) {
    return absl::DataLossError(absl::StrCat("result is ", result.num_rows, " x ", result.k,
                                            ", expected ", rows.lengths.size(), " x ", k));
  }
  return testing::VerifySelection(rows.batch(), k, options, result.indices.data());
}

absl::StatusOr<testing::Distribution> ParseDistribution(const std::string& name) {
  for (testing::Distribution d : testing::kAllDistributions) {
    if (testing::DistributionName(d) == name) return d;
  }
  std::vector<std::string> names;
  for (testing::Distribution d : testing::kAllDistributions) {
    names.emplace_back(testing::DistributionName(d));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown distribution '", name, "' (", absl::StrJoin(names, ", "), ")"));
}

absl::StatusOr<testing::LengthPattern> ParseLengthPattern(const std::string& name) {
  if (name == "full") return testing::LengthPattern::kFull;
  if (name == "causal") return testing::LengthPattern::kCausalTerminal;
  if (name == "random") return testing::LengthPattern::kRandom;
  if (name == "edges") return testing::LengthPattern::kEdges;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown length pattern '", name, "' (full, causal, random, edges)"));
}

}  // namespace topk::tools
