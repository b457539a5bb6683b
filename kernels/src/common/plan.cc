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
    case Route::kGeneralExact:
      return "general-exact";
  }
  return "unknown";
}

std::string Plan::Explain() const {
  return absl::StrFormat(
      "K=%d M_cap=%d N_cap=%d layout=%s dtype=%s -> route=%s stride=%d split=%d grid=%d block=%d "
      "workspace=%d B%s%s",
      shape.k, shape.max_rows, shape.max_width,
      shape.layout == Layout::kPitched ? "pitched" : "packed", ScoreTypeName(shape.dtype),
      RouteName(route), sample_stride, split, grid, block, workspace_bytes,
      options.sorted ? " sorted" : "", options.deterministic ? " deterministic" : "");
}

}  // namespace topk
