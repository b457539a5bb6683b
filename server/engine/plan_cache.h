// Per-worker cache of plans keyed by shape bucket: requests of similar shape
// share a plan (and, on the GPU, its captured graph) instead of re-planning.
#pragma once

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "server/engine/backend.h"
#include "topk/selector.h"

namespace topk::server {

// The bucket of a request: rows and width rounded up to a power of two (at
// most the limits), K and the options exact.
struct PlanKey {
  int32_t k = 0;
  int64_t max_rows = 0;
  int64_t max_width = 0;
  bool sorted = false;
  bool deterministic = false;

  friend bool operator==(const PlanKey&, const PlanKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const PlanKey& key) {
    return H::combine(std::move(h), key.k, key.max_rows, key.max_width, key.sorted,
                      key.deterministic);
  }
};

PlanKey BucketOf(int32_t k, int64_t rows, int64_t max_length, const SelectOptions& options,
                 const EngineLimits& limits);

// Smallest power of two >= v (v >= 1), capped at `cap`.
int64_t RoundUpPow2(int64_t v, int64_t cap);

class PlanCache {
 public:
  // `capacity` bounds the entries; beyond it plans are made but not kept.
  explicit PlanCache(size_t capacity) : capacity_(capacity) { plans_.reserve(capacity); }

  // The cached plan of `key`, or a new one from `backend`. The pointer is
  // valid until the next Get.
  absl::StatusOr<const Plan*> Get(const PlanKey& key, const WorkerBackend& backend);

 private:
  size_t capacity_;
  absl::flat_hash_map<PlanKey, Plan> plans_;
  Plan scratch_;  // the uncached plan when the cache is full
};

}  // namespace topk::server
