// The score type on the wire (topk.v1.ScoreType) and in the server
// (topk::ScoreType): the one place the two are mapped, and where a value the
// proto does not define is refused.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "topk/contract.h"
#include "topk/v1/topk.pb.h"

namespace topk::server {

// The type of a wire value; INVALID_ARGUMENT naming `field` (e.g.
// "inline_rows.dtype") for a value outside the enum (proto3 keeps unknown
// enum numbers, so the field can hold any int32).
absl::StatusOr<ScoreType> ScoreTypeFromWire(int32_t value, absl::string_view field);

v1::ScoreType ScoreTypeToWire(ScoreType type);

}  // namespace topk::server
