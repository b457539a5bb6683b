// Names and one-line explanations of plans (the planner's --explain output).
#include "absl/strings/str_format.h"
#include "topk/selector.h"

namespace topk {

std::string_view RouteName(Route route) {
  switch (route) {
    case Route::kCpuSampled:
      return "cpu-sampled";
    case Route::kCpuExact:
      return "cpu-exact";
    case Route::kPersistentSampled:
      return "persistent-sampled";
    case Route::kKvSplitSampled:
      return "kv-split-sampled";
    case Route::kRowLocalExact:
      return "row-local-exact";
    case Route::kShortRowExact:
      return "short-row-exact";
    case Route::kClusterSampled:
      return "cluster-sampled";
    case Route::kGeneralExact:
      return "general-exact";
    case Route::kResidentDecode:
      return "resident-decode";
  }
  return "unknown";
}

std::string Plan::Explain() const {
  return absl::StrFormat(
      "K=%d M_cap=%d N_cap=%d layout=%s dtype=%s -> route=%s stride=%d split=%d grid=%d block=%d "
      "%sworkspace=%d B%s%s%s%s",
      shape.k, shape.max_rows, shape.max_width,
      shape.layout == Layout::kPitched ? "pitched" : "packed", ScoreTypeName(shape.dtype),
      RouteName(route), sample_stride, split, grid, block,
      ctas_per_sm > 0 ? absl::StrFormat("ctas_per_sm=%d ", ctas_per_sm) : std::string(),
      workspace_bytes, options.sorted ? " sorted" : "",
      options.deterministic ? " deterministic" : "", why.empty() ? "" : " why: ", why);
}

}  // namespace topk
