// The engine's view of a backend. A Device stands for one execution resource
// (a GPU, or the host CPU); each engine worker gets its own WorkerBackend
// from it, holding everything a request needs (selector, stream, staging and
// device buffers, workspace), all allocated once at start.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/engine/job.h"
#include "topk/contract.h"
#include "topk/selector.h"

namespace topk::server {

// The largest request the engine accepts; every buffer is sized from these.
struct EngineLimits {
  int32_t max_k = 2048;
  int64_t max_rows = 1024;
  int64_t max_width = int64_t{1} << 20;
  int64_t max_batch_bytes = int64_t{256} << 20;  // 4 * sum(lengths)
};

// Rows as the request carries them: host memory, packed valid prefixes.
struct HostRows {
  const float* scores = nullptr;         // packed, 4-byte aligned; null: read `source`
  const ScoreSource* source = nullptr;   // only for backends with stages_scores()
  const int32_t* lengths = nullptr;      // num_rows
  const int64_t* row_offsets = nullptr;  // num_rows, in elements
  int64_t num_rows = 0;
  int64_t total_elements = 0;  // sum(lengths)
};

struct DeviceDescription {
  int32_t ordinal = -1;  // -1: the host CPU
  std::string name;
  std::string uuid;
  int64_t memory_bytes = 0;
};

class WorkerBackend {
 public:
  virtual ~WorkerBackend() = default;

  virtual absl::StatusOr<Plan> MakePlan(const ProblemShape& shape,
                                        const SelectOptions& options) const = 0;

  // Selects the rows of `rows` with `plan` into host buffers `indices`
  // (num_rows x k) and `row_status` (num_rows). Errors of code UNAVAILABLE
  // mean the device is broken (sticky); others fail this request only.
  virtual absl::Status Select(const Plan& plan, const HostRows& rows, int32_t* indices,
                              RowStatus* row_status) = 0;

  // True when the backend copies the scores into its own staging anyway (the
  // GPU's pinned buffers): it then takes HostRows::source directly, and
  // staged_scores() is that host copy after Select (for return_values).
  virtual bool stages_scores() const { return false; }
  virtual const float* staged_scores() const { return nullptr; }
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string backend_name() const = 0;
  virtual DeviceDescription description() const = 0;
  // One per worker; allocates that worker's buffers for `limits`.
  virtual absl::StatusOr<std::unique_ptr<WorkerBackend>> CreateWorker(
      const EngineLimits& limits) = 0;
};

// Largest workspace any plan within `limits` asks for: the plans are probed
// over power-of-two buckets of K, rows and width (the buckets the engine
// uses), so the workspace can be allocated once.
absl::StatusOr<size_t> MaxWorkspaceBytes(const Selector& selector, const EngineLimits& limits);

}  // namespace topk::server
