// "No request may write where it reads": the bytes a Select by reference
// touches through each of its fields, and the check that what it writes
// (output.indices, output.values) shares no byte with anything else it reads
// or writes. Overlap would make the answer depend on the order in which the
// selector reads and writes, and on the CUDA backend on the GPU's timing.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/regions/region.h"

namespace topk::server {

// One field's bytes: `rows` runs of elements in one region. Row r starts at
// element starts[r] (when given, else r * stride) after byte `offset` of
// the region and spans lengths[r] elements (when given, else `length`).
// Rows of 0 elements touch nothing.
struct TouchedBytes {
  absl::string_view field;   // "output.indices"
  absl::string_view region;  // the region's name in the request
  MemoryPlace place;         // the region's memory (see MemoryPlace)
  uint64_t offset = 0;
  uint64_t element_bytes = 1;
  int64_t rows = 1;
  absl::Span<const int64_t> starts;
  int64_t stride = 0;
  absl::Span<const int32_t> lengths;
  int64_t length = 0;
  bool writes = false;
};

// INVALID_ARGUMENT naming both fields, the region(s) and the rows when a
// field that writes shares a byte with any other field (two fields that
// only read may share bytes). The caller checked every field's bytes
// against its region, so no sum here overflows. Exact per row: a hull test
// first (each field's lowest and highest byte) leaves the common layouts
// at O(rows); only fields whose hulls meet are compared row by row, after
// a sort when a field's rows are not in address order.
absl::Status CheckNoOverlap(absl::Span<const TouchedBytes> fields);

}  // namespace topk::server
