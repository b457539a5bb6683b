// Request checks done on the gRPC thread before a request is queued: every
// failure is INVALID_ARGUMENT with a message naming the field (and the row).
// NaN is the one input error found later, by the selector's own pass.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/engine/backend.h"

namespace topk::server {

// Checks K, the row count, every length and the byte count against `limits`.
// Returns max_r L_r.
absl::StatusOr<int32_t> ValidateSelect(int32_t k, absl::Span<const int32_t> lengths,
                                       size_t score_bytes, const EngineLimits& limits);

}  // namespace topk::server
