// Host-side checks of the operator contract (docs/design.md section 1).
#include "absl/strings/str_format.h"
#include "topk/selector.h"

namespace topk {
namespace {

absl::Status ValidateScoreType(ScoreType dtype) {
  for (ScoreType known : kAllScoreTypes) {
    if (dtype == known) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("dtype = %d: not fp32 (0), bf16 (1) or fp16 (2)", static_cast<int>(dtype)));
}

// Exactly the pointer of the batch's type: a 16-bit batch read through the
// FP32 pointer (or the reverse) would select from the wrong bytes.
absl::Status ValidateScorePointers(const RowBatch& batch) {
  const bool wide = batch.dtype == ScoreType::kFloat32;
  const bool present = wide ? batch.scores != nullptr : batch.scores16 != nullptr;
  const bool other = wide ? batch.scores16 != nullptr : batch.scores != nullptr;
  if (other) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: set for a %s batch (use %s)", wide ? "scores16" : "scores",
                        ScoreTypeName(batch.dtype), wide ? "scores" : "scores16"));
  }
  if (!present && batch.width > 0) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: null pointer for a %s batch",
                                                      wide ? "scores" : "scores16",
                                                      ScoreTypeName(batch.dtype)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateShape(const ProblemShape& shape) {
  if (shape.k < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("k = %d: must be >= 1", shape.k));
  }
  if (shape.max_rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_rows = %d: must be >= 1", shape.max_rows));
  }
  if (shape.max_width < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_width = %d: must be >= 1", shape.max_width));
  }
  return ValidateScoreType(shape.dtype);
}

absl::Status ValidateBatch(const RowBatch& batch, int32_t k) {
  if (k < 1) return absl::InvalidArgumentError(absl::StrFormat("k = %d: must be >= 1", k));
  if (batch.num_rows < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("num_rows = %d: must be >= 0", batch.num_rows));
  }
  if (batch.width < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("width = %d: must be >= 0", batch.width));
  }
  if (absl::Status s = ValidateScoreType(batch.dtype); !s.ok()) return s;
  if (batch.num_rows == 0) return absl::OkStatus();
  if (batch.lengths == nullptr) return absl::InvalidArgumentError("lengths: null pointer");
  if (absl::Status s = ValidateScorePointers(batch); !s.ok()) return s;
  if (batch.layout == Layout::kPitched) {
    if (batch.pitch < batch.width) {
      return absl::InvalidArgumentError(
          absl::StrFormat("pitch = %d: must be >= width = %d", batch.pitch, batch.width));
    }
  } else if (batch.row_offsets == nullptr) {
    return absl::InvalidArgumentError("row_offsets: null pointer for a packed layout");
  }
  for (int64_t r = 0; r < batch.num_rows; ++r) {
    const int32_t length = batch.lengths[r];
    if (length < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("lengths[%d] = %d: a valid length cannot be negative", r, length));
    }
    if (length > batch.width) {
      return absl::InvalidArgumentError(
          absl::StrFormat("lengths[%d] = %d: exceeds the row width %d", r, length, batch.width));
    }
    if (batch.layout == Layout::kPacked && batch.row_offsets[r] < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "row_offsets[%d] = %d: an offset cannot be negative", r, batch.row_offsets[r]));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckBatchFitsPlan(const Plan& plan, const RowBatch& batch) {
  if (batch.num_rows > plan.shape.max_rows) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "num_rows = %d: exceeds the plan's max_rows %d", batch.num_rows, plan.shape.max_rows));
  }
  if (batch.width > plan.shape.max_width) {
    return absl::InvalidArgumentError(absl::StrFormat("width = %d: exceeds the plan's max_width %d",
                                                      batch.width, plan.shape.max_width));
  }
  if (batch.layout != plan.shape.layout) {
    return absl::InvalidArgumentError("layout: differs from the plan's layout");
  }
  if (batch.dtype != plan.shape.dtype) {
    return absl::InvalidArgumentError(absl::StrFormat("dtype = %s: the plan was made for %s",
                                                      ScoreTypeName(batch.dtype),
                                                      ScoreTypeName(plan.shape.dtype)));
  }
  return absl::OkStatus();
}

}  // namespace topk
