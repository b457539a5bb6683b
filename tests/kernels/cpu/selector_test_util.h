// Helpers shared by the CPU selector suites: run a selector or the reference
// on a generated matrix and verify.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "topk/cpu_selector.h"
#include "topk/testing/generators.h"
#include "topk/testing/reference.h"
#include "topk/testing/verifier.h"

namespace topk::testing {

struct Selection {
  absl::Status status;
  std::vector<int32_t> indices;
  std::vector<RowStatus> row_status;
};

inline Selection RunSelector(Selector& selector, const RowBatch& batch, int32_t k,
                             const SelectOptions& options) {
  Selection s;
  ProblemShape shape{k, std::max<int64_t>(batch.num_rows, 1), std::max<int64_t>(batch.width, 1),
                     batch.layout, batch.dtype};
  absl::StatusOr<Plan> plan = selector.MakePlan(shape, options);
  if (!plan.ok()) {
    s.status = plan.status();
    return s;
  }
  s.indices.assign(batch.num_rows * static_cast<int64_t>(k), -7);
  s.row_status.assign(batch.num_rows, RowStatus::kBadLength);
  s.status = selector.Run(*plan, batch, {s.indices.data(), s.row_status.data()}, {});
  return s;
}

inline Selection RunReference(const RowBatch& batch, int32_t k, const SelectOptions& options) {
  Selection s;
  s.indices.assign(batch.num_rows * static_cast<int64_t>(k), -7);
  s.row_status.assign(batch.num_rows, RowStatus::kBadLength);
  s.status = ReferenceSelect(batch, k, options, {s.indices.data(), s.row_status.data()});
  return s;
}

}  // namespace topk::testing
