// The short-row kernel's variants (CudaSelectorConfig::short_row_variant), a
// bit set shared by the host planner and the kernels (plain constants, no CUDA
// or Abseil headers).
#pragma once

namespace topk {

// The row kept in shared memory by the first pass (widened to FP32, rows of up
// to kShortRowMaxSharedRowBytes / 4 values), so that the second pass reads
// shared memory instead of L2. The buffer costs CTAs per SM (rows of 8K: 4
// instead of 6), which cost more than the shorter passes saved at 8K
// (bench/NOTES.md, "Selector III: short rows"): off by default, for A/B runs.
inline constexpr int kShortRowSharedRow = 1;
inline constexpr int kShortRowMaxSharedRowBytes = 49152;
// The planner's default.
inline constexpr int kShortRowDefaultVariant = 0;

}  // namespace topk
