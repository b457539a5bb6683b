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

namespace topk::server {

// The one place the row limit is enforced: a whole request, or a stream's
// rows so far (which cuts a runaway stream off before it fills memory).
absl::Status CheckRowCount(int64_t rows, const RequestLimits& limits);

// A stream's score bytes so far against max_batch_bytes.
absl::Status CheckReceivedScoreBytes(int64_t bytes, const RequestLimits& limits);

// Rows by reference (`rows`, their span in the client's region) against
// max_batch_bytes: only rows the server copies count, since they would
// overflow the staging it sizes; rows read where they are cost the server no
// memory, so no byte limit applies to them (max_rows and max_width still
// do). Read in place: rows on a GPU, and host rows that are aligned floats
// when the backend reads host rows in place (`host_rows_read_in_place`:
// Engine::reads_host_rows_in_place(), the CPU backend; StageOnHost copies
// the others). The one place this is decided.
absl::Status CheckRegionRowBytes(const RowSource& rows, bool host_rows_read_in_place,
                                 const RequestLimits& limits);

// Checks K, the row count, every length and the byte count (bytes(dtype) *
// sum(lengths)) against `limits`.
// `num_rows` is how many lengths the request holds; `lengths` may keep fewer
// when that is over the limit (the decoder stops storing them there).
// Returns max_r L_r.
absl::StatusOr<int32_t> ValidateSelect(int32_t k, int64_t num_rows,
                                       absl::Span<const int32_t> lengths, size_t score_bytes,
                                       const RequestLimits& limits,
                                       ScoreType dtype = ScoreType::kFloat32);

}  // namespace topk::server
