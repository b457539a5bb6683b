#include "server/engine/plan_cache.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"

namespace topk::server {

int64_t RoundUpPow2(int64_t v, int64_t cap) {
  const int64_t p =
      static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(v, 1))));
  return std::min(p, cap);
}

PlanKey BucketOf(int32_t k, int64_t rows, int64_t max_length, const SelectOptions& options,
                 const EngineLimits& limits) {
  return PlanKey{.k = k,
                 .max_rows = RoundUpPow2(rows, limits.max_rows),
                 .max_width = RoundUpPow2(max_length, limits.max_width),
                 .sorted = options.sorted,
                 .deterministic = options.deterministic};
}

absl::StatusOr<const Plan*> PlanCache::Get(const PlanKey& key, const WorkerBackend& backend) {
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  const ProblemShape shape{
      .k = key.k, .max_rows = key.max_rows, .max_width = key.max_width, .layout = Layout::kPacked};
  const SelectOptions options{.sorted = key.sorted, .deterministic = key.deterministic};
  absl::StatusOr<Plan> plan = backend.MakePlan(shape, options);
  if (!plan.ok()) return plan.status();
  if (plans_.size() >= capacity_) {
    scratch_ = *std::move(plan);
    return &scratch_;
  }
  return &plans_.emplace(key, *std::move(plan)).first->second;
}

absl::StatusOr<size_t> MaxWorkspaceBytes(const Selector& selector, const EngineLimits& limits) {
  size_t most = 0;
  int64_t planned = 0;
  absl::Status first_error;
  auto probe = [&](int32_t k, int64_t rows, int64_t width) {
    for (bool sorted : {false, true}) {
      for (bool deterministic : {false, true}) {
        const ProblemShape shape{
            .k = k, .max_rows = rows, .max_width = width, .layout = Layout::kPacked};
        absl::StatusOr<Plan> plan =
            selector.MakePlan(shape, {.sorted = sorted, .deterministic = deterministic});
        if (!plan.ok()) {
          // A bucket the backend cannot plan fails its own requests later
          // (with this message); it must not keep the server from starting.
          if (first_error.ok()) {
            first_error =
                absl::Status(plan.status().code(),
                             absl::StrCat("planning k=", k, " rows=", rows, " width=", width, ": ",
                                          plan.status().message()));
          }
          continue;
        }
        ++planned;
        most = std::max(most, plan->workspace_bytes);
      }
    }
  };
  // Every bucket the engine can form: K exact is too many to probe, so K is
  // probed at powers of two and at max_k; plans are monotone in K in both
  // backends (the worker re-checks every plan against the allocation anyway).
  for (int64_t rows = 1;; rows = RoundUpPow2(rows * 2, limits.max_rows)) {
    for (int64_t width = 1;; width = RoundUpPow2(width * 2, limits.max_width)) {
      for (int64_t k = 1;; k = RoundUpPow2(k * 2, limits.max_k)) {
        probe(static_cast<int32_t>(k), rows, width);
        if (k >= limits.max_k) break;
      }
      if (width >= limits.max_width) break;
    }
    if (rows >= limits.max_rows) break;
  }
  if (planned == 0) return first_error;
  return most;
}

}  // namespace topk::server
