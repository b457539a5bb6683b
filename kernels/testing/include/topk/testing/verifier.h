// The exactness verifier any test or benchmark calls on any backend's output.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "topk/contract.h"

namespace topk::testing {

// Checks `indices` (num_rows x k, host memory) against the rows of `batch`
// (host memory):
//  * L_r > K: K distinct indices in [0, L_r) whose minimum value is >= the
//    maximum of the rest of the valid prefix (set-valued: ties either way);
//  * L_r <= K: exactly {0..L_r-1} followed by... any order of them, and -1 in
//    the remaining K - L_r slots (the -1s are the last K - L_r slots);
//  * a row with a NaN in its valid prefix must be reported as RowStatus::kNan
//    in row_status (when given) and its output is not checked further;
//  * options.sorted: values descending, ties by ascending index;
//  * options.deterministic: ties at the K-th value resolved to the smallest
//    indices; unsorted rows in ascending index order.
// Returns OkStatus or an error naming the first bad row and what is wrong.
absl::Status VerifySelection(const RowBatch& batch, int32_t k, const SelectOptions& options,
                             const int32_t* indices, const RowStatus* row_status = nullptr);

}  // namespace topk::testing
