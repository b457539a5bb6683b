// A CUDA plan's workspace (kernels/src/cuda/workspace_layout.h): the one
// function both the planner (Plan::workspace_bytes) and the selector (the
// kernels' pointers into it, MakeParams) take it from.
#pragma once

#include "topk/cuda_selector.h"
#include "topk/selector.h"
#include "workspace_layout.h"

namespace topk {

// What the plan's route keeps beyond the header: nothing (short rows), the
// grid's CTA slices, or the slices and the KV-split row state.
cuda::WorkspaceParts CudaWorkspaceParts(Route route);
// The plan's layout (its route, shape and grid; config.kv_split_band sizes
// the KV-split row state).
cuda::WorkspaceLayout CudaLayoutWorkspace(const Plan& plan, const CudaSelectorConfig& config);

}  // namespace topk
