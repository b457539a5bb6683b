// The oracle: a sort-based exact top-K that is obviously correct and slow.
#pragma once

#include "absl/status/status.h"
#include "topk/contract.h"

namespace topk::testing {

// Host memory only. Honours the contract fully: sentinels for L <= K, NaN rows
// reported (and filled with kEmptySlot), sorted and deterministic modes
// (deterministic ties go to the smallest indices; unsorted deterministic rows
// in ascending index order).
absl::Status ReferenceSelect(const RowBatch& batch, int32_t k, const SelectOptions& options,
                             const OutputView& out);

}  // namespace topk::testing
