#include "server/engine/coalescing.h"

namespace topk::server {
namespace {

enum class TargetKind { kResponse, kHost, kDevice };

TargetKind TargetOf(const SelectInput& input) {
  if (input.output_target == nullptr) return TargetKind::kResponse;
  return input.output_target->device_ordinal < 0 ? TargetKind::kHost : TargetKind::kDevice;
}

}  // namespace

int64_t SourceElements(const SelectInput& input) {
  // Whole floats (two elements of a 16-bit type), so every part starts
  // 4-byte aligned in the staging.
  const auto bytes = static_cast<int64_t>(input.rows->size_bytes());
  const int64_t floats =
      (bytes + static_cast<int64_t>(sizeof(float)) - 1) / static_cast<int64_t>(sizeof(float));
  return floats * (static_cast<int64_t>(sizeof(float)) / ScoreTypeBytes(input.dtype));
}

int64_t StagedBytes(const SelectInput& input) {
  if (input.rows->device_ordinal() >= 0) return 0;
  return SourceElements(input) * ScoreTypeBytes(input.dtype);
}

bool Compatible(const SelectInput& lead, const SelectInput& other) {
  if (other.k != lead.k || other.options.sorted != lead.options.sorted ||
      other.options.deterministic != lead.options.deterministic ||
      other.return_values != lead.return_values || other.dtype != lead.dtype) {
    return false;
  }
  if (other.rows->device_ordinal() != lead.rows->device_ordinal() ||
      other.device_ordinal != lead.device_ordinal || TargetOf(other) != TargetOf(lead)) {
    return false;
  }
  const bool device_lengths = lead.device_lengths != nullptr;
  if ((other.device_lengths != nullptr) != device_lengths) return false;
  return !device_lengths || other.max_length == lead.max_length;
}

bool CanJoin(const SelectInput& lead, const SelectInput& other, const BatchFootprint& batch,
             const RequestLimits& limits, int64_t max_jobs) {
  return batch.jobs < max_jobs && Compatible(lead, other) &&
         batch.rows + RowCount(other) <= limits.max_rows &&
         batch.staged_bytes + StagedBytes(other) <= limits.max_batch_bytes;
}

void Add(const SelectInput& input, BatchFootprint& batch) {
  ++batch.jobs;
  batch.rows += RowCount(input);
  batch.staged_bytes += StagedBytes(input);
}

}  // namespace topk::server
