// The CPU backend: the same three-phase sample-guided algorithm as the GPU
// kernels (docs/design.md section 2), threads over rows. Used when no GPU is present
// and as an independent second implementation to test the GPU against.
#pragma once

#include <memory>

#include "topk/selector.h"

namespace topk {

struct CpuSelectorConfig {
  int threads = 0;              // 0: hardware concurrency
  bool enable_sampling = true;  // false: exact coarse recovery for every row (Route::kCpuExact)
};

// Counters of which path each row took; summed over a Run.
struct CpuRouteStats {
  int64_t rows = 0;
  int64_t short_rows = 0;      // L <= K
  int64_t certified = 0;       // tau0 certified directly
  int64_t band_rescued = 0;    // needed the tau1 band
  int64_t exact_recovery = 0;  // exact coarse recovery (incl. unusable views)
  int64_t candidates = 0;      // sum of certified candidate counts
};

class CpuSelector final : public Selector {
 public:
  explicit CpuSelector(CpuSelectorConfig config = {});
  ~CpuSelector() override;

  std::string_view name() const override { return "cpu"; }
  absl::StatusOr<Plan> MakePlan(const ProblemShape& shape,
                                const SelectOptions& options) const override;
  // The CPU backend reads host memory; context.workspace may be null (the
  // selector then uses its own per-thread scratch).
  absl::Status Run(const Plan& plan, const RowBatch& batch, const OutputView& out,
                   const RunContext& context) override;

  CpuRouteStats last_run_stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace topk
