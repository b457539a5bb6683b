// Checks any backend's output against the contract without trusting any
// selector: one pass over each row plus a sort of its K outputs.
#include "topk/testing/verifier.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "row_order.h"
#include "topk/testing/score_types.h"

namespace topk::testing {
namespace {

absl::Status RowError(int64_t r, const std::string& what) {
  return absl::FailedPreconditionError(absl::StrFormat("row %d: %s", r, what));
}

// L <= K: every valid index once in the first L slots, then kEmptySlot.
absl::Status CheckShortRow(int64_t r, int32_t length, int32_t k, const int32_t* got) {
  std::vector<uint8_t> seen(length, 0);
  for (int32_t j = 0; j < length; ++j) {
    const int32_t i = got[j];
    if (i < 0 || i >= length) {
      return RowError(r, absl::StrFormat("slot %d holds %d, outside [0, L = %d) (L <= K = %d: "
                                         "every valid index comes first)",
                                         j, i, length, k));
    }
    if (seen[i]) return RowError(r, absl::StrFormat("index %d appears twice", i));
    seen[i] = 1;
  }
  for (int32_t j = length; j < k; ++j) {
    if (got[j] != kEmptySlot) {
      return RowError(r, absl::StrFormat("slot %d holds %d, expected the sentinel %d (L = %d)", j,
                                         got[j], kEmptySlot, length));
    }
  }
  return absl::OkStatus();
}

// L > K: K distinct valid indices, none smaller than anything left out.
absl::Status CheckLongRow(int64_t r, const float* row, int32_t length, int32_t k,
                          const SelectOptions& options, const int32_t* got) {
  std::vector<uint8_t> chosen(length, 0);
  uint32_t kth_key = 0;  // largest key (smallest value) among the chosen
  int32_t kth_max_index = -1;
  for (int32_t j = 0; j < k; ++j) {
    const int32_t i = got[j];
    if (i == kEmptySlot) {
      return RowError(
          r, absl::StrFormat("slot %d holds the sentinel although L = %d > K = %d", j, length, k));
    }
    if (i < 0 || i >= length) {
      return RowError(r, absl::StrFormat("slot %d holds %d, outside [0, L = %d)", j, i, length));
    }
    if (chosen[i]) return RowError(r, absl::StrFormat("index %d appears twice", i));
    chosen[i] = 1;
    const uint32_t key = Key32(row[i]);
    if (j == 0 || key > kth_key) {
      kth_key = key;
      kth_max_index = i;
    } else if (key == kth_key) {
      kth_max_index = std::max(kth_max_index, i);
    }
  }
  for (int32_t i = 0; i < length; ++i) {
    if (chosen[i]) continue;
    const uint32_t key = Key32(row[i]);
    if (key < kth_key) {
      return RowError(r, absl::StrFormat("index %d (value %.9g) was left out but is larger than "
                                         "the selected value %.9g",
                                         i, row[i], BitsToFloat(BitsOfDescendingKey(kth_key))));
    }
    if (options.deterministic && key == kth_key && i < kth_max_index) {
      return RowError(r, absl::StrFormat("deterministic tie at value %.9g: index %d was left out "
                                         "but the larger index %d was selected",
                                         row[i], i, kth_max_index));
    }
  }
  return absl::OkStatus();
}

// The order of the first `count` slots asked for by the options.
absl::Status CheckOrder(int64_t r, const float* row, int32_t count, const SelectOptions& options,
                        const int32_t* got) {
  for (int32_t j = 1; j < count; ++j) {
    const int32_t a = got[j - 1];
    const int32_t b = got[j];
    if (options.sorted) {
      if (!ByValueThenIndex{row}(a, b)) {
        return RowError(r, absl::StrFormat("sorted output out of order at slot %d: index %d "
                                           "(value %.9g) before index %d (value %.9g)",
                                           j, a, row[a], b, row[b]));
      }
    } else if (options.deterministic && a >= b) {
      return RowError(r, absl::StrFormat("deterministic unsorted output must be in ascending "
                                         "index order: slot %d holds %d after %d",
                                         j, b, a));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifySelection(const RowBatch& batch, int32_t k, const SelectOptions& options,
                             const int32_t* indices, const RowStatus* row_status) {
  if (k < 1) return absl::InvalidArgumentError(absl::StrFormat("k = %d: must be >= 1", k));
  if (batch.num_rows > 0 && indices == nullptr) {
    return absl::InvalidArgumentError("indices: null pointer");
  }
  std::vector<float> widened;
  for (int64_t r = 0; r < batch.num_rows; ++r) {
    const int32_t length = batch.lengths[r];
    if (length < 0 || length > batch.width) {
      return absl::InvalidArgumentError(
          absl::StrFormat("lengths[%d] = %d: outside [0, width = %d]", r, length, batch.width));
    }
    // 16-bit rows are checked on their exact FP32 widenings.
    const float* row = RowAsFloats(batch, r, length, widened);
    const int32_t* got = indices + r * static_cast<int64_t>(k);
    const bool has_nan = PrefixHasNan(row, length);
    if (row_status != nullptr) {
      const RowStatus want = has_nan ? RowStatus::kNan : RowStatus::kOk;
      if (row_status[r] != want) {
        return RowError(
            r, absl::StrFormat("row status %d, expected %d (%s)", static_cast<int>(row_status[r]),
                               static_cast<int>(want),
                               has_nan ? "NaN in the valid prefix" : "no NaN in the valid prefix"));
      }
    }
    if (has_nan) continue;
    absl::Status status = length <= k ? CheckShortRow(r, length, k, got)
                                      : CheckLongRow(r, row, length, k, options, got);
    if (!status.ok()) return status;
    status = CheckOrder(r, row, std::min(length, k), options, got);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace topk::testing
