// The backends' interface, as the engine sees it. A Device stands for one
// execution resource (a GPU, or the host CPU); each engine worker gets its own
// WorkerBackend from it, holding everything a request needs (selector,
// stream, staging and device buffers, workspace), all allocated once at
// start. Backends know nothing of gRPC or of the engine's queues.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/backends/row_source.h"
#include "topk/contract.h"
#include "topk/selector.h"

namespace topk::server {

// The largest request the server accepts; every buffer is sized from these.
struct RequestLimits {
  int32_t max_k = 2048;
  int64_t max_rows = 1024;
  int64_t max_width = int64_t{1} << 20;
  int64_t max_batch_bytes = int64_t{256} << 20;  // bytes(dtype) * sum(lengths)
};

// Where a request by reference wants its answer: row r's K indices at
// element r * row_stride of `indices`, its K values (when not null, elements
// of the rows' ScoreType) at the same place in `values`. Memory of the GPU
// `device_ordinal`, or host memory for -1. The transport checked every byte
// of it.
struct OutputTarget {
  int32_t* indices = nullptr;
  void* values = nullptr;
  int64_t row_stride = 0;  // elements, >= k
  int32_t device_ordinal = -1;
};

// Interprocess CUDA events (cudaEvent_t, untyped here): the selection waits
// for `wait` on the GPU and records `record` after its output.
struct GpuOrderingEvents {
  void* wait = nullptr;
  void* record = nullptr;
};

// One request's rows: packed valid prefixes, read from `source`.
struct SelectRows {
  const RowSource* source = nullptr;
  const int32_t* lengths = nullptr;      // num_rows
  const int64_t* row_offsets = nullptr;  // num_rows, in elements
  int64_t num_rows = 0;
  int64_t total_elements = 0;  // sum(lengths)
  // Lengths on the source's GPU (CUDA IPC regions): the CUDA backend reads
  // these instead of uploading `lengths`, which is then null, and selects
  // with `width` (the client's bound, which the transport checked every
  // row's extent against) so the selector refuses any longer row.
  const int32_t* device_lengths = nullptr;
  int64_t width = 0;
  GpuOrderingEvents ordering;
  // The type of the source's elements; offsets and lengths count them.
  ScoreType dtype = ScoreType::kFloat32;
};

// Host buffers a selection writes: num_rows x k indices and num_rows
// statuses; values (num_rows x k elements of rows.dtype, NaN at -1 slots)
// only when not null.
// With a GPU `target`, the CUDA backend writes indices and values there
// instead, in place on the device, and only the statuses come back.
struct SelectResults {
  int32_t* indices = nullptr;
  void* values = nullptr;
  RowStatus* row_status = nullptr;
  const OutputTarget* device_target = nullptr;
};

struct DeviceDescription {
  int32_t ordinal = -1;  // -1: the host CPU
  std::string name;
  std::string uuid;
  int64_t memory_bytes = 0;
  // The score types this device's selector serves (FP32 always).
  std::vector<ScoreType> score_types{ScoreType::kFloat32};
};

// What a worker backend counts, for the metrics (read from any thread).
struct BackendCounters {
  int64_t graph_captures = 0;          // CUDA graphs captured (one per plan bucket)
  int64_t graph_capture_failures = 0;  // buckets that run uncaptured instead
  int64_t graph_replays = 0;           // selections served by replaying a graph
};

class WorkerBackend {
 public:
  virtual ~WorkerBackend() = default;

  virtual BackendCounters counters() const { return {}; }

  virtual absl::StatusOr<Plan> MakePlan(const ProblemShape& shape,
                                        const SelectOptions& options) const = 0;

  // Selects `rows` with `plan` into `results`. Errors of code UNAVAILABLE
  // mean the device is broken (sticky); others fail this request only.
  virtual absl::Status Select(const Plan& plan, const SelectRows& rows,
                              const SelectResults& results) = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string backend_name() const = 0;
  virtual DeviceDescription description() const = 0;
  // Device memory in use right now (by every process), or -1 where there is
  // no device memory to report (the host CPU).
  virtual int64_t memory_used_bytes() const { return -1; }
  // One per worker; allocates that worker's buffers for `limits`.
  virtual absl::StatusOr<std::unique_ptr<WorkerBackend>> CreateWorker(
      const RequestLimits& limits) = 0;
};

// results.values[r * k + j] = the score at results.indices[r * k + j] of row
// r (NaN at -1), read from the host elements of rows.dtype the backend
// selected on and written in that type. Rows whose status is not kOk get
// NaN: their indices are not an answer.
void GatherValues(const void* scores, const SelectRows& rows, int32_t k,
                  const SelectResults& results);

// The quiet NaN written at unanswered value slots, as the bits of `dtype`
// (FP32: 0x7fc00000; BF16: 0x7fc0; FP16: 0x7e00).
uint32_t QuietNanBits(ScoreType dtype);

}  // namespace topk::server
