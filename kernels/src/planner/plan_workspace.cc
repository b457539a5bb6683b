// The workspace's sizes are workspace_layout.h's; these are its public names
// (cuda_selector.h) and the plan's layout (plan_workspace.h).
#include "plan_workspace.h"

namespace topk {

int64_t CudaSliceEntries(int32_t k) { return cuda::SliceEntries(k); }

size_t CudaWorkspaceBytes(int32_t k, int32_t grid) {
  return static_cast<size_t>(cuda::kHeaderBytes +
                             int64_t{grid} * cuda::CtaSliceBytes(k, cuda::SliceEntries(k)));
}

int32_t CudaStagedK(int32_t k, int64_t max_width) { return cuda::StagedK(k, max_width); }

int64_t CudaKvRowEntries(int32_t k) { return cuda::KvRowEntries(k); }

cuda::WorkspaceParts CudaWorkspaceParts(Route route) {
  if (route == Route::kShortRowExact || route == Route::kResidentDecode) {
    return cuda::WorkspaceParts::kHeaderOnly;
  }
  if (route == Route::kKvSplitSampled) return cuda::WorkspaceParts::kSlicesAndRowState;
  return cuda::WorkspaceParts::kSlices;
}

// No row is longer than N_cap, so none commits more than min(K, N_cap): the
// slices (candidate stores, output staging, sort scratch) are sized for that,
// not for K. The short-row route keeps its frontiers in shared memory.
cuda::WorkspaceLayout CudaLayoutWorkspace(const Plan& plan, const CudaSelectorConfig& config) {
  return cuda::LayoutWorkspace(CudaWorkspaceParts(plan.route), plan.shape.k, plan.shape.max_width,
                               plan.grid, plan.shape.max_rows, config.kv_split_band);
}

}  // namespace topk
