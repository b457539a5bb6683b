// Requests are planned per shape bucket, not per exact shape: similar
// requests share a plan (and, on the GPU, its captured graph). The engine
// buckets requests with BucketOf; the backends size their workspace for the
// largest plan over every bucket and key their graphs by the same PlanKey.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "server/backends/backend.h"
#include "topk/selector.h"

namespace topk::server {

// The bucket of a request: rows and width rounded up to a power of two (at
// most the limits), K, the options and the score type exact.
struct PlanKey {
  int32_t k = 0;
  int64_t max_rows = 0;
  int64_t max_width = 0;
  bool sorted = false;
  bool deterministic = false;
  ScoreType dtype = ScoreType::kFloat32;

  friend bool operator==(const PlanKey&, const PlanKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const PlanKey& key) {
    return H::combine(std::move(h), key.k, key.max_rows, key.max_width, key.sorted,
                      key.deterministic, key.dtype);
  }
};

PlanKey BucketOf(int32_t k, int64_t rows, int64_t max_length, const SelectOptions& options,
                 const RequestLimits& limits, ScoreType dtype = ScoreType::kFloat32);

// The key of the bucket `plan` was made for.
PlanKey KeyOf(const Plan& plan);

// Smallest power of two >= v (v >= 1), capped at `cap`.
int64_t RoundUpPow2(int64_t v, int64_t cap);

// Largest workspace any plan within `limits` asks for: the plans are probed
// over power-of-two buckets of K, rows and width (and every score type), so
// the workspace can be allocated once.
absl::StatusOr<size_t> MaxWorkspaceBytes(const Selector& selector, const RequestLimits& limits);

}  // namespace topk::server
