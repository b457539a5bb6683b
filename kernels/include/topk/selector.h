// The selector interface every backend implements: plan -> workspace size -> run.
//
// A plan is fixed once per shape bucket (K, M_cap, N_cap, layout) before any
// request is served; the workspace it asks for does not grow with the live row
// count, so a server can preallocate everything at start.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "topk/contract.h"

namespace topk {

// The shape bucket a plan serves: any live M <= max_rows, any L_r <= max_width.
struct ProblemShape {
  int32_t k = 0;
  int64_t max_rows = 0;   // M_cap
  int64_t max_width = 0;  // N_cap
  Layout layout = Layout::kPitched;
  ScoreType dtype = ScoreType::kFloat32;
};

// Which kernel family (or CPU route) a plan runs.
enum class Route : uint8_t {
  kCpuSampled = 0,  // CPU three-phase selector (exact route for short rows inside)
  kCpuExact = 1,    // CPU, sampling switched off: exact coarse recovery for every row
  kPersistentSampled = 2,
  kKvSplitSampled = 3,
  kRowLocalExact = 4,   // the persistent kernel with sampling off
  kShortRowExact = 5,   // one small CTA per row, many per SM; no sampling
  kClusterSampled = 6,  // few long rows: one thread-block cluster per row (8 or 16 CTAs)
  kGeneralExact = 7,    // large K fallback
  kResidentDecode = 8,  // decode batches: one cluster per row, the row kept in shared memory
};

std::string_view RouteName(Route route);

struct Plan {
  ProblemShape shape;
  SelectOptions options;
  Route route = Route::kCpuSampled;
  int32_t sample_stride = 0;  // s; 0 when the route does not sample
  int32_t split = 1;          // CTAs (or CPU tasks) per row
  int32_t grid = 0;           // CTAs, or CPU worker threads
  int32_t block = 0;          // threads per CTA (GPU routes)
  int32_t ctas_per_sm = 0;    // the cluster route's kernel variant (1 or 2), else 0
  size_t workspace_bytes = 0;
  // Why the planner chose this route (its table's measurement or its rule).
  std::string why;

  // One human-readable line: the decisions and why.
  std::string Explain() const;
};

// Everything a run needs besides the rows: the plan's workspace (backend
// memory, workspace_bytes long) and, for the CUDA backend, a cudaStream_t.
struct RunContext {
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  void* stream = nullptr;
};

class Selector {
 public:
  virtual ~Selector() = default;

  virtual std::string_view name() const = 0;

  // Fixes the route and the workspace for a shape bucket. InvalidArgument for
  // k < 1, negative or zero caps, or anything the backend cannot serve.
  virtual absl::StatusOr<Plan> MakePlan(const ProblemShape& shape,
                                        const SelectOptions& options) const = 0;

  // Selects the top-K of every row of `batch` (num_rows <= plan's max_rows,
  // width <= max_width) into `out`. Returns an error only for a broken
  // call (bad plan/batch pairing, bad lengths, workspace too small, device
  // failure); a NaN row is reported in out.row_status and does not fail the run.
  virtual absl::Status Run(const Plan& plan, const RowBatch& batch, const OutputView& out,
                           const RunContext& context) = 0;
};

// Host-side checks of a batch against the contract: k >= 1, num_rows >= 0,
// a known dtype, the score pointer of that dtype present and the other null,
// pitch >= width for pitched rows, 0 <= L_r <= width.
// Messages name the field and the row, e.g. "lengths[3] = -2 is negative".
// Needs host-readable lengths (and offsets).
absl::Status ValidateBatch(const RowBatch& batch, int32_t k);

// Checks a shape bucket: k >= 1, max_rows >= 1, max_width >= 1, a known dtype.
absl::Status ValidateShape(const ProblemShape& shape);

// Checks that a batch fits a plan's bucket (rows, width, layout, dtype).
absl::Status CheckBatchFitsPlan(const Plan& plan, const RowBatch& batch);

}  // namespace topk
