// topk::CpuSelector: plans, validates, and spreads rows over a worker pool.
#include "topk/cpu_selector.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "row_selector.h"
#include "topk/algorithm_constants.h"
#include "worker_pool.h"

namespace topk {

struct CpuSelector::Impl {
  Impl(int threads, bool sampling)
      : enable_sampling(sampling), pool(threads), scratch(threads), stats(threads) {}

  const bool enable_sampling;
  cpu::WorkerPool pool;
  absl::Mutex run_mu;  // one Run at a time: the scratch below is per worker
  std::vector<cpu::RowScratch> scratch ABSL_GUARDED_BY(run_mu);
  std::vector<CpuRouteStats> stats ABSL_GUARDED_BY(run_mu);
  mutable absl::Mutex stats_mu;
  CpuRouteStats last ABSL_GUARDED_BY(stats_mu);
};

namespace {

int ResolveThreads(int requested) {
  if (requested > 0) return requested;
  return std::max(1u, std::thread::hardware_concurrency());
}

void Count(const cpu::RowResult& result, CpuRouteStats& stats) {
  ++stats.rows;
  switch (result.path) {
    case cpu::RowPath::kShort:
      ++stats.short_rows;
      break;
    case cpu::RowPath::kCertified:
      ++stats.certified;
      break;
    case cpu::RowPath::kBandRescued:
      ++stats.band_rescued;
      break;
    case cpu::RowPath::kExactRecovery:
      ++stats.exact_recovery;
      break;
  }
  stats.candidates += result.candidates;
}

cpu::RowResult SelectRowOfBatch(const RowBatch& batch, int64_t r, const cpu::RowParams& params,
                                int32_t* out, cpu::RowScratch& scratch) {
  const int32_t length = batch.lengths[r];
  switch (batch.dtype) {
    case ScoreType::kBFloat16:
      return cpu::SelectRow<cpu::Bf16Scores>(batch.row16(r), length, r, params, out, scratch);
    case ScoreType::kFloat16:
      return cpu::SelectRow<cpu::Fp16Scores>(batch.row16(r), length, r, params, out, scratch);
    case ScoreType::kFloat32:
      break;
  }
  return cpu::SelectRow<cpu::Fp32Scores>(batch.row(r), length, r, params, out, scratch);
}

}  // namespace

CpuSelector::CpuSelector(CpuSelectorConfig config)
    : impl_(std::make_unique<Impl>(ResolveThreads(config.threads), config.enable_sampling)) {}

CpuSelector::~CpuSelector() = default;

absl::StatusOr<Plan> CpuSelector::MakePlan(const ProblemShape& shape,
                                           const SelectOptions& options) const {
  if (absl::Status s = ValidateShape(shape); !s.ok()) return s;
  if (shape.max_width > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_width = %d: indices are int32, so rows are at most %d wide",
                        shape.max_width, std::numeric_limits<int32_t>::max()));
  }
  Plan plan;
  plan.shape = shape;
  plan.options = options;
  plan.route = impl_->enable_sampling ? Route::kCpuSampled : Route::kCpuExact;
  plan.sample_stride = impl_->enable_sampling ? kSampleStride : 0;
  plan.split = 1;
  plan.grid = impl_->pool.size();
  plan.block = 0;
  // Reported for the caller's information: the CPU backend owns its scratch.
  plan.workspace_bytes =
      static_cast<size_t>(plan.grid) * cpu::RowScratch::BytesFor(shape.max_width);
  return plan;
}

absl::Status CpuSelector::Run(const Plan& plan, const RowBatch& batch, const OutputView& out,
                              const RunContext& /*context*/) {
  if (plan.route != Route::kCpuSampled && plan.route != Route::kCpuExact) {
    return absl::InvalidArgumentError(
        absl::StrFormat("plan route %s is not a CPU route", RouteName(plan.route)));
  }
  if (absl::Status s = ValidateBatch(batch, plan.shape.k); !s.ok()) return s;
  if (absl::Status s = CheckBatchFitsPlan(plan, batch); !s.ok()) return s;
  if (batch.num_rows > 0 && out.indices == nullptr) {
    return absl::InvalidArgumentError("out.indices: null pointer");
  }

  cpu::RowParams params;
  params.k = plan.shape.k;
  params.sampling = plan.route == Route::kCpuSampled;
  params.stride = plan.sample_stride > 0 ? plan.sample_stride : kSampleStride;
  params.sorted = plan.options.sorted;
  params.deterministic = plan.options.deterministic;

  absl::MutexLock run_lock(&impl_->run_mu);
  std::atomic<int64_t> next_row{0};
  const int64_t k = plan.shape.k;
  impl_->pool.RunOnAll([&](int worker) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    cpu::RowScratch& scratch = impl_->scratch[worker];
    CpuRouteStats& stats = impl_->stats[worker];
    stats = CpuRouteStats{};
    scratch.Reserve(plan.shape.max_width);
    for (int64_t r = next_row.fetch_add(1, std::memory_order_relaxed); r < batch.num_rows;
         r = next_row.fetch_add(1, std::memory_order_relaxed)) {
      const cpu::RowResult result =
          SelectRowOfBatch(batch, r, params, out.indices + r * k, scratch);
      if (out.row_status != nullptr) out.row_status[r] = result.status;
      Count(result, stats);
    }
  });
  CpuRouteStats total;
  for (const CpuRouteStats& s : impl_->stats) {
    total.rows += s.rows;
    total.short_rows += s.short_rows;
    total.certified += s.certified;
    total.band_rescued += s.band_rescued;
    total.exact_recovery += s.exact_recovery;
    total.candidates += s.candidates;
  }
  absl::MutexLock stats_lock(&impl_->stats_mu);
  impl_->last = total;
  return absl::OkStatus();
}

CpuRouteStats CpuSelector::last_run_stats() const {
  absl::MutexLock lock(&impl_->stats_mu);
  return impl_->last;
}

}  // namespace topk
