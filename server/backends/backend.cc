#include "server/backends/backend.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace topk::server {

absl::Status CheckRowCount(int64_t rows, const RequestLimits& limits) {
  if (rows > limits.max_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("lengths: ", rows, " rows exceed max_rows = ", limits.max_rows));
  }
  return absl::OkStatus();
}

namespace {

// Element-typed gather: Element is float for FP32 and the raw uint16_t bit
// pattern for the 16-bit types (values travel in the input type, unchanged).
template <typename Element>
void GatherTyped(const Element* scores, const SelectRows& rows, int32_t k,
                 const SelectResults& results, Element nan) {
  auto* values = static_cast<Element*>(results.values);
  for (int64_t r = 0; r < rows.num_rows; ++r) {
    const Element* row = scores + rows.row_offsets[r];
    const int32_t* row_indices = results.indices + r * k;
    Element* row_values = values + r * k;
    const bool answered = results.row_status[r] == RowStatus::kOk;
    for (int64_t j = 0; j < k; ++j) {
      row_values[j] = answered && row_indices[j] >= 0 ? row[row_indices[j]] : nan;
    }
  }
}

}  // namespace

uint32_t QuietNanBits(ScoreType dtype) {
  switch (dtype) {
    case ScoreType::kBFloat16:
      return 0x7fc0;
    case ScoreType::kFloat16:
      return 0x7e00;
    case ScoreType::kFloat32:
      break;
  }
  return 0x7fc00000;
}

void GatherValues(const void* scores, const SelectRows& rows, int32_t k,
                  const SelectResults& results) {
  if (rows.dtype == ScoreType::kFloat32) {
    float nan;
    const uint32_t bits = QuietNanBits(ScoreType::kFloat32);
    std::memcpy(&nan, &bits, sizeof(nan));
    GatherTyped(static_cast<const float*>(scores), rows, k, results, nan);
    return;
  }
  GatherTyped(static_cast<const uint16_t*>(scores), rows, k, results,
              static_cast<uint16_t>(QuietNanBits(rows.dtype)));
}

const float* StageParts(const SelectRows& rows, Staging staging_mode, std::byte* staging) {
  if (rows.parts.size() == 1) return StageOnHost(rows.source(), staging_mode, staging);
  for (const RowPart& part : rows.parts) {
    std::byte* dest = staging + part.element_offset * ScoreTypeBytes(rows.dtype);
    part.source->CopyRange(0, part.source->size_bytes(), dest, CopyStores::kCached);
  }
  return reinterpret_cast<const float*>(staging);
}

}  // namespace topk::server
