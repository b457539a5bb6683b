#include "server/engine/plan_cache.h"

#include <utility>

namespace topk::server {

absl::StatusOr<const Plan*> PlanCache::Get(const PlanKey& key, const WorkerBackend& backend) {
  if (auto it = plans_.find(key); it != plans_.end()) {
    hits_.fetch_add(1, std::memory_order_relaxed);
    return &it->second;
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  const ProblemShape shape{.k = key.k,
                           .max_rows = key.max_rows,
                           .max_width = key.max_width,
                           .layout = Layout::kPacked,
                           .dtype = key.dtype};
  const SelectOptions options{.sorted = key.sorted, .deterministic = key.deterministic};
  absl::StatusOr<Plan> plan = backend.MakePlan(shape, options);
  if (!plan.ok()) return plan.status();
  if (plans_.size() >= capacity_) {
    scratch_ = *std::move(plan);
    return &scratch_;
  }
  return &plans_.emplace(key, *std::move(plan)).first->second;
}

}  // namespace topk::server
