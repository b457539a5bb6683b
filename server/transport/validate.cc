#include "server/transport/validate.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace topk::server {

absl::Status CheckRowCount(int64_t rows, const RequestLimits& limits) {
  if (rows > limits.max_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("lengths: ", rows, " rows exceed max_rows = ", limits.max_rows));
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

absl::Status CheckRegionRowBytes(const RowSource& rows, bool host_rows_read_in_place,
                                 const RequestLimits& limits) {
  const bool in_place = rows.device_ordinal() >= 0 ||
                        (host_rows_read_in_place && rows.InPlaceHostFloats() != nullptr);
  if (!in_place && rows.size_bytes() > static_cast<uint64_t>(limits.max_batch_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "region_rows: the rows span ", rows.size_bytes(),
        " bytes, over max_batch_bytes = ", limits.max_batch_bytes,
        host_rows_read_in_place ? " (rows not 4-byte aligned are copied into the staging)"
                                : " (this backend copies host rows into its staging)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int32_t> ValidateSelect(int32_t k, int64_t num_rows,
                                       absl::Span<const int32_t> lengths, size_t score_bytes,
                                       const RequestLimits& limits, ScoreType dtype) {
  if (k < 1 || k > limits.max_k) {
    return absl::InvalidArgumentError(
        absl::StrCat("k = ", k, " is out of range [1, ", limits.max_k, "] (max_k)"));
  }
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

}  // namespace topk::server
