// Per-worker cache of plans keyed by shape bucket (server/backends/
// plan_buckets.h): the first request of a bucket makes its plan, later ones
// reuse it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "server/backends/backend.h"
#include "server/backends/plan_buckets.h"
#include "topk/selector.h"

namespace topk::server {

class PlanCache {
 public:
  // `capacity` bounds the entries; beyond it plans are made but not kept.
  explicit PlanCache(size_t capacity) : capacity_(capacity) { plans_.reserve(capacity); }

  // The cached plan of `key`, or a new one from `backend`. The pointer is
  // valid until the next Get.
  absl::StatusOr<const Plan*> Get(const PlanKey& key, const WorkerBackend& backend);

  // Lookups that found a plan, and that had to make one (any thread).
  int64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  int64_t misses() const { return misses_.load(std::memory_order_relaxed); }

 private:
  size_t capacity_;
  absl::flat_hash_map<PlanKey, Plan> plans_;
  Plan scratch_;  // the uncached plan when the cache is full
  std::atomic<int64_t> hits_{0};
  std::atomic<int64_t> misses_{0};
};

}  // namespace topk::server
