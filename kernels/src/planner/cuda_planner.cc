// The CUDA planner: a pure function of the shape bucket, the options, the
// device facts and the selector configuration. No CUDA calls, so it is
// unit-tested on machines without a GPU. It validates the request, then
// takes the rules' route (route_candidates.cc), lets the measured table
// override it (table_override.cc) and derives the route's parameters
// (route_parameters.cc); route_choice.h describes the steps.
#include <utility>

#include "absl/strings/str_format.h"
#include "plan_workspace.h"
#include "route_choice.h"
#include "route_policies.h"
#include "topk/cuda_selector.h"

namespace topk {

absl::Status CheckCudaScoreType(ScoreType dtype) {
  for (ScoreType served : kAllScoreTypes) {
    if (dtype == served) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("dtype = %d: not fp32 (0), bf16 (1) or fp16 (2)", static_cast<int>(dtype)));
}

namespace {

// The shape, the device facts and the configuration's A/B values the
// kernels serve.
absl::Status CheckRequest(const ProblemShape& shape, const CudaDeviceInfo& device,
                          const CudaSelectorConfig& config) {
  if (absl::Status s = ValidateShape(shape); !s.ok()) return s;
  if (absl::Status s = CheckCudaScoreType(shape.dtype); !s.ok()) return s;
  if (shape.k > kCudaMaxK) {
    return absl::InvalidArgumentError(
        absl::StrFormat("k = %d: the CUDA backend serves k <= %d", shape.k, kCudaMaxK));
  }
  if (shape.max_width > (int64_t{1} << 31) - 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_width = %d: indices are int32", shape.max_width));
  }
  if (device.sm_count <= 0 || device.persistent_ctas_per_sm <= 0) {
    return absl::FailedPreconditionError("device info: no SMs or no resident CTAs");
  }
  if (config.sample_stride != 0 && config.sample_stride != 32 && config.sample_stride != 64 &&
      config.sample_stride != 128 && config.sample_stride != 256) {
    return absl::InvalidArgumentError(
        absl::StrFormat("sample_stride = %d: 32, 64, 128 or 256", config.sample_stride));
  }
  if (config.sample_run != 1 && config.sample_run != 8) {
    return absl::InvalidArgumentError(
        absl::StrFormat("sample_run = %d: 1 or 8", config.sample_run));
  }
  if (config.cluster_size != 0 && config.cluster_size != 8 && config.cluster_size != 16) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cluster_size = %d: 0, 8 or 16", config.cluster_size));
  }
  if (config.resident_cluster_size != 0 && config.resident_cluster_size != 1 &&
      config.resident_cluster_size != 2 && config.resident_cluster_size != 4 &&
      config.resident_cluster_size != 8 && config.resident_cluster_size != 16) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "resident_cluster_size = %d: 0, 1, 2, 4, 8 or 16", config.resident_cluster_size));
  }
  if (config.resident_threads != 0 && config.resident_threads != planner::kResident.threads &&
      config.resident_threads != planner::kResident.wide_threads) {
    return absl::InvalidArgumentError(
        absl::StrFormat("resident_threads = %d: 0, %d or %d", config.resident_threads,
                        planner::kResident.threads, planner::kResident.wide_threads));
  }
  if (config.cluster_ctas_per_sm < 0 || config.cluster_ctas_per_sm > 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cluster_ctas_per_sm = %d: 0, 1 or 2", config.cluster_ctas_per_sm));
  }
  if (config.short_row_variant != 0 && config.short_row_variant != kShortRowSharedRow) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "short_row_variant = %d: 0 or %d", config.short_row_variant, kShortRowSharedRow));
  }
  if (config.ctas_per_sm_target != 0 && config.ctas_per_sm_target != 2 &&
      config.ctas_per_sm_target != 4) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ctas_per_sm_target = %d: 0, 2 or 4", config.ctas_per_sm_target));
  }
  if (config.kv_split_force != 0 && config.kv_split_force != 2 && config.kv_split_force != 4 &&
      config.kv_split_force != 8) {
    return absl::InvalidArgumentError(
        absl::StrFormat("kv_split_force = %d: 0, 2, 4 or 8", config.kv_split_force));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Plan> PlanCudaSelection(const ProblemShape& shape, const SelectOptions& options,
                                       const CudaDeviceInfo& device,
                                       const CudaSelectorConfig& config) {
  if (absl::Status s = CheckRequest(shape, device, config); !s.ok()) return s;
  const planner::PlanInputs in{shape, device, config};
  // The table's verdict carries Plan::why either way: its measurement, or
  // why the rules decide (forced configuration, no cell, a rules cell).
  planner::TableVerdict table = planner::ConsultRouteTable(in);
  const planner::RouteChoice choice =
      table.overrides ? table.choice : planner::ChooseRouteByRules(in);
  Plan plan;
  plan.shape = shape;
  plan.options = options;
  plan.why = std::move(table.why);
  planner::DeriveRouteParameters(choice, in, &plan);
  if (config.sample_stride == 0 && plan.sample_stride == planner::kDenseSampleStride) {
    plan.why += "; stride 32: a few waves of rows, where an underfilled row is the tail";
  }
  // Sized for the derived grid (plan_workspace.h).
  plan.workspace_bytes = static_cast<size_t>(CudaLayoutWorkspace(plan, config).total_bytes);
  return plan;
}

}  // namespace topk
