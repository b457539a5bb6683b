// Host rows in the wire layout (valid prefixes back to back), made from the
// topk_testing generators or read from a file, and checked with its verifier.
// Used by topk-cli, topk-loadgen, the server tests and the server bench; the
// client library itself does not depend on this.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "topk/client/client.h"
#include "topk/testing/generators.h"

namespace topk::tools {

struct PackedRows {
  std::vector<float> scores;       // kFloat32
  std::vector<uint16_t> scores16;  // kBFloat16 / kFloat16 (then `scores` is empty)
  ScoreType dtype = ScoreType::kFloat32;
  std::vector<int32_t> lengths;
  std::vector<int64_t> offsets;  // row starts in the scores, in elements
  int64_t width = 0;             // max length (the RowBatch width)

  client::Rows view() const;
  RowBatch batch() const;  // packed RowBatch over this object: keep it alive
  // The score bytes as they travel.
  int64_t bytes() const {
    return static_cast<int64_t>(scores.size() * sizeof(float) + scores16.size() * sizeof(uint16_t));
  }
};

// The wire name of a score type (the enums share their numbers).
v1::ScoreType ToWire(ScoreType type);
// "fp32" | "bf16" | "fp16" (the --dtype flags of topk-cli and topk-loadgen).
absl::StatusOr<ScoreType> ParseScoreType(const std::string& name);

PackedRows Pack(const testing::ScoreMatrix& matrix);
PackedRows Generate(const testing::GeneratorSpec& spec);
PackedRows FromLengths(std::vector<float> scores, std::vector<int32_t> lengths);

// The file format of `topk-cli select --save` and `replay`: magic "TOPKROWS",
// uint32 version 1, int64 rows, int32 lengths[rows], float scores[sum]
// (FP32 rows only: Save refuses 16-bit rows).
absl::Status Save(const PackedRows& rows, const std::string& path);
absl::StatusOr<PackedRows> Load(const std::string& path);

// Checks a result with the exactness verifier (every row, or `max_rows`).
absl::Status Verify(const PackedRows& rows, int32_t k, const SelectOptions& options,
                    const client::SelectResult& result);

// Parses a distribution / length pattern name ("indexer", "causal", ...).
absl::StatusOr<testing::Distribution> ParseDistribution(const std::string& name);
absl::StatusOr<testing::LengthPattern> ParseLengthPattern(const std::string& name);

}  // namespace topk::tools
