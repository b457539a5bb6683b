#include "server/transport/validate.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/transport/score_dtype.h"

namespace topk::server {

absl::Status CheckK(int32_t k, const RequestLimits& limits) {
  if (k < 1 || k > limits.max_k) {
    return absl::InvalidArgumentError(
        absl::StrCat("k = ", k, " is out of range [1, ", limits.max_k, "] (max_k)"));
  }
  return absl::OkStatus();
}

absl::Status CheckReceivedScoreBytes(int64_t bytes, const RequestLimits& limits) {
  if (bytes > limits.max_batch_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scores: ", bytes, " bytes exceed max_batch_bytes = ", limits.max_batch_bytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<int32_t> ValidateSelect(int32_t k, int64_t num_rows,
                                       absl::Span<const int32_t> lengths, size_t score_bytes,
                                       const RequestLimits& limits, ScoreType dtype) {
  if (absl::Status s = CheckK(k, limits); !s.ok()) return s;
  if (num_rows == 0) {
    return absl::InvalidArgumentError("lengths: the batch is empty (0 rows)");
  }
  if (absl::Status s = CheckRowCount(num_rows, limits); !s.ok()) return s;
  if (static_cast<int64_t>(lengths.size()) != num_rows) {
    return absl::InternalError(
        absl::StrCat("lengths: ", lengths.size(), " of ", num_rows, " rows were decoded"));
  }
  int64_t total = 0;
  int32_t longest = 0;
  for (size_t r = 0; r < lengths.size(); ++r) {
    const int32_t length = lengths[r];
    if (length < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("lengths[", r, "] = ", length, " is negative (row ", r, ")"));
    }
    if (length > limits.max_width) {
      return absl::InvalidArgumentError(absl::StrCat("lengths[", r, "] = ", length,
                                                     " exceeds max_width = ", limits.max_width,
                                                     " (row ", r, ")"));
    }
    total += length;
    longest = std::max(longest, length);
  }
  const int element_bytes = ScoreTypeBytes(dtype);
  const int64_t expected = total * element_bytes;
  // FP32 messages stay as they were; the others name the type.
  const std::string of_type =
      dtype == ScoreType::kFloat32 ? "" : absl::StrCat(" of ", std::string(ScoreTypeName(dtype)));
  if (expected > limits.max_batch_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("scores: ", element_bytes, " * sum(lengths) = ", expected,
                     " bytes exceed max_batch_bytes = ", limits.max_batch_bytes, of_type));
  }
  if (static_cast<int64_t>(score_bytes) != expected) {
    return absl::InvalidArgumentError(absl::StrCat("scores: ", score_bytes, " bytes, expected ",
                                                   element_bytes, " * sum(lengths) = ", expected,
                                                   " for ", lengths.size(), " rows", of_type));
  }
  return longest;
}

absl::StatusOr<InlineRows> CheckInlineRows(int32_t k, int32_t wire_dtype, int64_t num_rows,
                                           absl::Span<const int32_t> lengths, const RowSource& rows,
                                           const RequestLimits& limits) {
  absl::StatusOr<ScoreType> dtype = ScoreTypeFromWire(wire_dtype, "inline_rows.dtype");
  if (!dtype.ok()) return dtype.status();
  absl::StatusOr<int32_t> longest =
      ValidateSelect(k, num_rows, lengths, rows.size_bytes(), limits, *dtype);
  if (!longest.ok()) return longest.status();
  return InlineRows{.rows = &rows, .lengths = lengths, .max_length = *longest, .dtype = *dtype};
}

}  // namespace topk::server
