#include "server/transport/score_dtype.h"

#include "absl/strings/str_cat.h"

namespace topk::server {

absl::StatusOr<ScoreType> ScoreTypeFromWire(int32_t value, absl::string_view field) {
  switch (value) {
    case v1::SCORE_TYPE_FP32:
      return ScoreType::kFloat32;
    case v1::SCORE_TYPE_BF16:
      return ScoreType::kBFloat16;
    case v1::SCORE_TYPE_FP16:
      return ScoreType::kFloat16;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(field, " = ", value,
                       " is not a ScoreType (SCORE_TYPE_FP32 = 0, SCORE_TYPE_BF16 = 1, "
                       "SCORE_TYPE_FP16 = 2)"));
  }
}

v1::ScoreType ScoreTypeToWire(ScoreType type) {
  switch (type) {
    case ScoreType::kBFloat16:
      return v1::SCORE_TYPE_BF16;
    case ScoreType::kFloat16:
      return v1::SCORE_TYPE_FP16;
    case ScoreType::kFloat32:
      break;
  }
  return v1::SCORE_TYPE_FP32;
}

}  // namespace topk::server
