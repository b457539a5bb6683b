// The unit of work the engine serves: one Select request, independent of how
// it arrived (unary, stream) and of gRPC itself, so the engine can be tested
// and benchmarked without a transport.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "server/backends/backend.h"
#include "server/backends/row_source.h"
#include "topk/contract.h"

namespace topk::server {

// A validated request: the transport checked every length, the byte count
// and K against the limits before the job reached the engine.
struct SelectInput {
  int32_t k = 0;
  SelectOptions options;
  bool return_values = false;
  absl::Span<const int32_t> lengths;  // M entries, 0 <= L_r <= max_width
  const RowSource* rows = nullptr;    // bytes(dtype) * sum(lengths) bytes, packed LE
  int32_t max_length = 0;             // max_r L_r (picks the plan bucket)
  // Rows by reference (regions): where each row starts in `rows`, in
  // elements (M entries, checked against the source's extent). Empty: the
  // rows are packed back to back as `lengths` say.
  absl::Span<const int64_t> row_offsets;
  // M lengths on the source's GPU, read there by the selector; `lengths` is
  // then empty and max_length is the client's bound on every L_r.
  const int32_t* device_lengths = nullptr;
  int64_t num_rows = 0;  // M (lengths.size() unless device_lengths)
  // Where the answer goes; null: into SelectOutput, for the response.
  const OutputTarget* output_target = nullptr;
  // Interprocess CUDA events to wait on before and record after (or null).
  GpuOrderingEvents ordering;
  // The device that must serve the job (the one its regions are on); -1: any.
  int32_t device_ordinal = -1;
  // The rows' element type; values come back in it.
  ScoreType dtype = ScoreType::kFloat32;
};

// M: the host lengths' count, or num_rows when the lengths are on a GPU.
inline int64_t RowCount(const SelectInput& input) {
  return input.device_lengths != nullptr ? input.num_rows
                                         : static_cast<int64_t>(input.lengths.size());
}

struct SelectTimings {
  // From Submit to the start of the backend call that served the job:
  // includes any wait for batch-mates.
  int64_t queue_us = 0;
  // The backend call, shared by every job of a coalesced batch.
  int64_t device_us = 0;
  // Jobs that call served, this one included: 1 unless coalesced.
  int32_t batch_requests = 1;
};

// What a worker hands back. The spans point into the worker's preallocated
// buffers and are valid only during SelectJob::Complete; both are empty when
// the input named an output target (the answer is already there).
struct SelectOutput {
  absl::Span<const int32_t> indices;  // M x K
  // M x K elements of input.dtype (LE bytes) when input.return_values, else empty.
  absl::Span<const std::byte> values;
  SelectTimings timings;
};

class SelectJob {
 public:
  virtual ~SelectJob() = default;
  virtual const SelectInput& input() const = 0;
  // True when the client went away; the worker then skips the selection.
  virtual bool IsCancelled() const = 0;
  // Called exactly once, on a worker thread (or on the submitting thread
  // when the queue rejects the job). `output` is meaningful only when
  // `status` is OK. The job may delete itself inside.
  virtual void Complete(const absl::Status& status, const SelectOutput& output) = 0;
};

}  // namespace topk::server
