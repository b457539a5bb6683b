#include "server/backends/backend.h"

#include <limits>

namespace topk::server {

void GatherValues(const float* scores, const SelectRows& rows, int32_t k,
                  const SelectResults& results) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t r = 0; r < rows.num_rows; ++r) {
    const float* row = scores + rows.row_offsets[r];
    const int32_t* row_indices = results.indices + r * k;
    float* row_values = results.values + r * k;
    const bool answered = results.row_status[r] == RowStatus::kOk;
    for (int64_t j = 0; j < k; ++j) {
      row_values[j] = answered && row_indices[j] >= 0 ? row[row_indices[j]] : nan;
    }
  }
}

const float* StageParts(const SelectRows& rows, Staging staging_mode, std::byte* staging) {
  if (rows.parts.size() == 1) return StageOnHost(rows.source(), staging_mode, staging);
  for (const RowPart& part : rows.parts) {
    std::byte* dest = staging + part.element_offset * static_cast<int64_t>(sizeof(float));
    part.source->CopyRange(0, part.source->size_bytes(), dest);
  }
  return reinterpret_cast<const float*>(staging);
}

}  // namespace topk::server
