// The oracle: sorts every valid index by (value descending, index ascending)
// and keeps the first K. Deliberately simple; speed is not its job.
#include "topk/testing/reference.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "absl/strings/str_format.h"
#include "row_order.h"
#include "topk/testing/score_types.h"

namespace topk::testing {

absl::Status ReferenceSelect(const RowBatch& batch, int32_t k, const SelectOptions& options,
                             const OutputView& out) {
  if (k < 1) return absl::InvalidArgumentError(absl::StrFormat("k = %d: must be >= 1", k));
  if (batch.num_rows > 0 && out.indices == nullptr) {
    return absl::InvalidArgumentError("out.indices: null pointer");
  }
  for (int64_t r = 0; r < batch.num_rows; ++r) {
    const int32_t length = batch.lengths[r];
    if (length < 0 || length > batch.width) {
      return absl::InvalidArgumentError(
          absl::StrFormat("lengths[%d] = %d: outside [0, width = %d]", r, length, batch.width));
    }
  }
  std::vector<int32_t> order;
  std::vector<float> widened;
  for (int64_t r = 0; r < batch.num_rows; ++r) {
    const int32_t length = batch.lengths[r];
    const float* row = RowAsFloats(batch, r, length, widened);
    int32_t* dst = out.indices + r * static_cast<int64_t>(k);
    std::fill(dst, dst + k, kEmptySlot);
    if (PrefixHasNan(row, length)) {
      if (out.row_status != nullptr) out.row_status[r] = RowStatus::kNan;
      continue;
    }
    if (out.row_status != nullptr) out.row_status[r] = RowStatus::kOk;
    order.resize(length);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), ByValueThenIndex{row});
    const int32_t taken = std::min(length, k);
    // Short rows keep every index: ascending unless sorted output is asked.
    if (!options.sorted && (options.deterministic || length <= k)) {
      std::sort(order.begin(), order.begin() + taken);
    }
    std::copy(order.begin(), order.begin() + taken, dst);
  }
  return absl::OkStatus();
}

}  // namespace topk::testing
