#include "server/backends/plan_buckets.h"

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
                 const RequestLimits& limits, ScoreType dtype) {
  return PlanKey{.k = k,
                 .max_rows = RoundUpPow2(rows, limits.max_rows),
                 .max_width = RoundUpPow2(max_length, limits.max_width),
                 .sorted = options.sorted,
                 .deterministic = options.deterministic,
                 .dtype = dtype};
}

PlanKey KeyOf(const Plan& plan) {
  return PlanKey{.k = plan.shape.k,
                 .max_rows = plan.shape.max_rows,
                 .max_width = plan.shape.max_width,
                 .sorted = plan.options.sorted,
                 .deterministic = plan.options.deterministic,
                 .dtype = plan.shape.dtype};
}

absl::StatusOr<size_t> MaxWorkspaceBytes(const Selector& selector, const RequestLimits& limits) {
  size_t most = 0;
  int64_t planned = 0;
  absl::Status first_error;
  auto probe = [&](int32_t k, int64_t rows, int64_t width, ScoreType dtype) {
    for (bool sorted : {false, true}) {
      for (bool deterministic : {false, true}) {
        const ProblemShape shape{.k = k,
                                 .max_rows = rows,
                                 .max_width = width,
                                 .layout = Layout::kPacked,
                                 .dtype = dtype};
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
        // A type the backend cannot select fails in planning, like any
        // other unplannable bucket, and costs no workspace.
        for (ScoreType dtype : kAllScoreTypes) probe(static_cast<int32_t>(k), rows, width, dtype);
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
