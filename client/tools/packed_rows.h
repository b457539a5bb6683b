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
  std::vector<float> scores;
  std::vector<int32_t> lengths;
  std::vector<int64_t> offsets;  // row starts in `scores`
  int64_t width = 0;             // max length (the RowBatch width)

  client::Rows view() const { return {.scores = scores, .lengths = lengths}; }
  RowBatch batch() const;  // packed RowBatch over this object: keep it alive
  int64_t bytes() const { return static_cast<int64_t>(scores.size() * sizeof(float)); }
};

PackedRows Pack(const testing::ScoreMatrix& matrix);
PackedRows Generate(const testing::GeneratorSpec& spec);
PackedRows FromLengths(std::vector<float> scores, std::vector<int32_t> lengths);

// The file format of `topk-cli select --save` and `replay`: magic "TOPKROWS",
// uint32 version 1, int64 rows, int32 lengths[rows], float scores[sum].
absl::Status Save(const PackedRows& rows, const std::string& path);
absl::StatusOr<PackedRows> Load(const std::string& path);

// Checks a result with the exactness verifier (every row, or `max_rows`).
absl::Status Verify(const PackedRows& rows, int32_t k, const SelectOptions& options,
                    const client::SelectResult& result);

// Parses a distribution / length pattern name ("indexer", "causal", ...).
absl::StatusOr<testing::Distribution> ParseDistribution(const std::string& name);
absl::StatusOr<testing::LengthPattern> ParseLengthPattern(const std::string& name);

}  // namespace topk::tools
