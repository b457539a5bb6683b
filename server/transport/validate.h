// Request checks done on the gRPC thread before a request is queued: every
// failure is INVALID_ARGUMENT with a message naming the field (and the row).
// NaN is the one input error found later, by the selector's own pass.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/backends/backend.h"
#include "server/backends/row_source.h"
#include "server/regions/region_binding.h"

namespace topk::server {

// K against max_k: one rule, for rows inline and by reference.
absl::Status CheckK(int32_t k, const RequestLimits& limits);

// A stream's score bytes so far against max_batch_bytes.
absl::Status CheckReceivedScoreBytes(int64_t bytes, const RequestLimits& limits);

// Checks K, the row count, every length and the byte count (bytes(dtype) *
// sum(lengths)) against `limits`.
// `num_rows` is how many lengths the request holds; `lengths` may keep fewer
// when that is over the limit (the decoder stops storing them there).
// Returns max_r L_r.
absl::StatusOr<int32_t> ValidateSelect(int32_t k, int64_t num_rows,
                                       absl::Span<const int32_t> lengths, size_t score_bytes,
                                       const RequestLimits& limits,
                                       ScoreType dtype = ScoreType::kFloat32);

// Rows sent inline (`rows`, as `wire_dtype` says, a topk.v1.ScoreType
// number): their type, then ValidateSelect. The one check of inline rows,
// with or without references to regions.
absl::StatusOr<InlineRows> CheckInlineRows(int32_t k, int32_t wire_dtype, int64_t num_rows,
                                           absl::Span<const int32_t> lengths, const RowSource& rows,
                                           const RequestLimits& limits);

}  // namespace topk::server
