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
#include "absl/types/span.h"
#include "server/backends/channel_executor.h"
#include "server/backends/row_source.h"
#include "topk/contract.h"
#include "topk/selector.h"

namespace topk::server {

// The largest request the server accepts; every buffer is sized from these.
struct RequestLimits {
  int32_t max_k = 2048;
  // A prefill batch of 2048..8192 rows by reference (docs/service.md,
  // "Limits"); the output buffers are max_rows x max_k x 8 bytes a worker.
  int64_t max_rows = 8192;
  int64_t max_width = int64_t{1} << 20;
  int64_t max_batch_bytes = int64_t{256} << 20;  // bytes(dtype) * sum(lengths)
};

// The one place the row limit is enforced, for every kind of request (rows
// inline, streamed, or by reference): a whole request, or a stream's rows so
// far (which cuts a runaway stream off before it fills memory).
absl::Status CheckRowCount(int64_t rows, const RequestLimits& limits);

// Where a request by reference wants its answer: row r's K indices at
// element r * row_stride of `indices`, its K values (when not null) at the
// same place in `values`. Memory of the GPU `device_ordinal`, or host
// memory for -1. The transport checked every byte of it.
struct OutputTarget {
  int32_t* indices = nullptr;
  void* values = nullptr;  // elements of the rows' ScoreType
  int64_t row_stride = 0;  // elements, >= k
  int32_t device_ordinal = -1;
};

// Interprocess CUDA events (cudaEvent_t, untyped here): the selection waits
// for `wait` on the GPU and records `record` after its output.
struct GpuOrderingEvents {
  void* wait = nullptr;
  void* record = nullptr;
};

// One job's share of a selection: rows [first_row, first_row + num_rows) of
// the batch, read from `source`. The engine coalesces compatible jobs into
// one backend call; a lone job is a batch of one part.
struct RowPart {
  const RowSource* source = nullptr;
  int64_t first_row = 0;
  int64_t num_rows = 0;
  // Where `source` begins in the batch's element space: host staging holds
  // the parts' sources back to back, part p's at element
  // parts[p].element_offset (4-byte aligned: each source is rounded up to
  // whole floats, two elements of a 16-bit type).
  int64_t element_offset = 0;
  // This part's lengths on the source's GPU (CUDA IPC regions): the CUDA
  // backend reads these instead of uploading host lengths, which are then
  // null for the whole batch, and selects with SelectRows::width (the
  // client's bound, equal for every part of such a batch, which the
  // transport checked every row's extent against) so the selector refuses
  // any longer row.
  const int32_t* device_lengths = nullptr;
  // Interprocess events: the batch waits for every part's `wait` and records
  // every part's `record` after its output.
  GpuOrderingEvents ordering;
  // Where this part's answer goes on the GPU (null: into SelectResults).
  // Every part of a batch has a target or none does.
  const OutputTarget* device_target = nullptr;
};

// A batch's rows: packed valid prefixes, read from its parts' sources.
struct SelectRows {
  absl::Span<const RowPart> parts;   // at least one, in row order
  const int32_t* lengths = nullptr;  // num_rows (null: device lengths)
  // num_rows, in elements of the batch's element space (see RowPart).
  const int64_t* row_offsets = nullptr;
  int64_t num_rows = 0;
  int64_t total_elements = 0;  // the element space's extent: sum of sources
  int64_t width = 0;           // every part's bound (device lengths only)
  // The type of every part's elements; offsets and lengths count them.
  ScoreType dtype = ScoreType::kFloat32;

  // The lone part's source (batches of one part only).
  const RowSource& source() const { return *parts.front().source; }
};

// Host buffers a selection writes: num_rows x k indices and num_rows
// statuses; values (num_rows x k elements of rows.dtype, NaN at -1 slots)
// only when not null.
// With GPU targets (RowPart::device_target), the CUDA backend writes each
// part's indices and values there instead, in place on the device, and only
// the statuses come back.
struct SelectResults {
  int32_t* indices = nullptr;
  void* values = nullptr;
  RowStatus* row_status = nullptr;
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

// Copies every part's source into `staging` at its element offset (the
// batch's element space in host memory); for a lone part whose floats are in
// place (and `staging_mode` allows) returns those instead.
const float* StageParts(const SelectRows& rows, Staging staging_mode, std::byte* staging);

class WorkerBackend {
 public:
  virtual ~WorkerBackend() = default;

  virtual BackendCounters counters() const { return {}; }

  virtual absl::StatusOr<Plan> MakePlan(const ProblemShape& shape,
                                        const SelectOptions& options) const = 0;

  // Selects `rows` with `plan` into `results`, in one launch however many
  // parts `rows` has. Errors of code UNAVAILABLE mean the device is broken
  // (sticky); others fail this call only (the engine then serves a
  // coalesced batch's jobs one by one, so each gets its own status).
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
  // An executor for a channel on this device, with its own plan, workspace
  // and (on a GPU) stream and captured graph. UNIMPLEMENTED where the
  // backend serves no channels.
  virtual absl::StatusOr<std::unique_ptr<ChannelExecutor>> OpenChannel(const ChannelSpec& spec) {
    (void)spec;
    return absl::UnimplementedError(backend_name() + " backend: no channels");
  }
  // Whether this device's contexts are MPS clients (false on the host).
  virtual bool mps() const { return false; }
  // A cheap round trip through the device's context (called from one thread,
  // the engine's device watch): an error when the context is lost, which a
  // GPU can be with no call of ours failing (another MPS client's fatal
  // fault poisons every client's context). OK on the host.
  virtual absl::Status Probe() { return absl::OkStatus(); }
};

// results.values[r * k + j] = the score at results.indices[r * k + j] of row
// r (NaN at -1), read from the host elements of rows.dtype the backend
// selected on (the batch's element space) and written in that type. Rows
// whose status is not kOk get NaN: their indices are not an answer.
void GatherValues(const void* scores, const SelectRows& rows, int32_t k,
                  const SelectResults& results);

// The quiet NaN written at unanswered value slots, as the bits of `dtype`
// (FP32: 0x7fc00000; BF16: 0x7fc0; FP16: 0x7e00).
uint32_t QuietNanBits(ScoreType dtype);

}  // namespace topk::server
