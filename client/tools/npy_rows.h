// Real rows for topk-loadgen from NumPy .npy files (np.save): a float32
// array of shape (M, N) (or (N,) for one row), optionally with a second file
// of M int32/int64 lengths that makes it padded rows (row r is its first
// lengths[r] values; the rest is padding and never sent). The layout a
// serving frontend already holds, so a load test can replay captured scores.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "packed_rows.h"

namespace topk::tools {

// `lengths_path` empty: every row is N long.
absl::StatusOr<PackedRows> LoadNpyRows(const std::string& scores_path,
                                       const std::string& lengths_path);

}  // namespace topk::tools
