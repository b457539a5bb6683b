// Fast CPU selector vs std::nth_element- and std::partial_sort-based exact
// top-k on indexer-like rows, one thread. Every benchmark verifies its output
// once, outside the timed loop. Run with --benchmark_min_time=... as needed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <vector>

#include "benchmark/benchmark.h"
#include "topk/cpu_selector.h"
#include "topk/keys.h"
#include "topk/testing/generators.h"
#include "topk/testing/verifier.h"

namespace topk {
namespace {

constexpr int32_t kK = 2048;
constexpr int kRowsInRotation = 4;  // distinct rows, so one row is not always cache-hot

// Rows of one width, generated once per width.
struct Rows {
  testing::ScoreMatrix matrix;
  explicit Rows(int64_t width) {
    testing::GeneratorSpec spec{.distribution = testing::Distribution::kIndexer,
                                .rows = kRowsInRotation,
                                .width = width,
                                .k = kK,
                                .seed = 42};
    matrix = testing::Generate(spec);
  }
  RowBatch one(int r) const {
    RowBatch b = matrix.batch();
    b.scores = matrix.batch().row(r);
    b.num_rows = 1;
    return b;
  }
};

const Rows& RowsOf(int64_t width) {
  static Rows* small = new Rows(128 * 1024);
  static Rows* large = new Rows(1024 * 1024);
  return width == 128 * 1024 ? *small : *large;
}

void Check(benchmark::State& state, const RowBatch& row, const std::vector<int32_t>& out) {
  const absl::Status s = testing::VerifySelection(row, kK, {}, out.data());
  if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
}

// Baseline 1: nth_element over (key32 << 32 | index), the fastest std-based
// exact selection we know: one compare of a plain integer, ties by index.
void NthElementSelect(const float* x, int64_t n, std::vector<uint64_t>& scratch, int32_t* out) {
  scratch.resize(n);
  for (int64_t i = 0; i < n; ++i) scratch[i] = (uint64_t{Key32(x[i])} << 32) | uint64_t(i);
  std::nth_element(scratch.begin(), scratch.begin() + kK, scratch.end());
  for (int j = 0; j < kK; ++j) out[j] = static_cast<int32_t>(scratch[j]);
}

// Baseline 2: partial_sort of an index array by value (the textbook top-k).
void PartialSortSelect(const float* x, int64_t n, std::vector<int32_t>& scratch, int32_t* out) {
  scratch.resize(n);
  std::iota(scratch.begin(), scratch.end(), 0);
  std::partial_sort(scratch.begin(), scratch.begin() + kK, scratch.end(),
                    [x](int32_t a, int32_t b) { return x[a] > x[b]; });
  std::copy_n(scratch.begin(), kK, out);
}

double SecondsPerNthElement(const Rows& rows, int64_t width) {
  std::vector<uint64_t> scratch;
  std::vector<int32_t> out(kK);
  std::vector<double> times;
  for (int rep = 0; rep < 9; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    NthElementSelect(rows.one(rep % kRowsInRotation).scores, width, scratch, out.data());
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(times.begin(), times.begin() + 4, times.end());
  return times[4];
}

void BM_CpuSelector(benchmark::State& state) {
  const int64_t width = state.range(0);
  const Rows& rows = RowsOf(width);
  CpuSelector selector(CpuSelectorConfig{.threads = 1});
  const Plan plan = *selector.MakePlan({kK, 1, width, Layout::kPitched}, {});
  std::vector<int32_t> out(kK);
  for (int r = 0; r < kRowsInRotation; ++r) {
    if (!selector.Run(plan, rows.one(r), {out.data(), nullptr}, {}).ok()) {
      state.SkipWithError("Run failed");
      return;
    }
    Check(state, rows.one(r), out);
  }
  const CpuRouteStats stats = selector.last_run_stats();
  int r = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    benchmark::DoNotOptimize(selector.Run(plan, rows.one(r), {out.data(), nullptr}, {}));
    benchmark::ClobberMemory();
    r = (r + 1) % kRowsInRotation;
  }
  const double mine =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
      static_cast<double>(state.iterations());
  state.counters["speedup_vs_nth_element"] = SecondsPerNthElement(rows, width) / mine;
  state.counters["candidates"] = static_cast<double>(stats.candidates);
  state.counters["certified"] = static_cast<double>(stats.certified);
  state.SetItemsProcessed(state.iterations() * width);
  state.SetBytesProcessed(state.iterations() * width * static_cast<int64_t>(sizeof(float)));
}

void BM_CpuSelectorExactRoute(benchmark::State& state) {
  const int64_t width = state.range(0);
  const Rows& rows = RowsOf(width);
  CpuSelector selector(CpuSelectorConfig{.threads = 1, .enable_sampling = false});
  const Plan plan = *selector.MakePlan({kK, 1, width, Layout::kPitched}, {});
  std::vector<int32_t> out(kK);
  if (!selector.Run(plan, rows.one(0), {out.data(), nullptr}, {}).ok()) return;
  Check(state, rows.one(0), out);
  int r = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(selector.Run(plan, rows.one(r), {out.data(), nullptr}, {}));
    r = (r + 1) % kRowsInRotation;
  }
  state.SetItemsProcessed(state.iterations() * width);
}

void BM_NthElement(benchmark::State& state) {
  const int64_t width = state.range(0);
  const Rows& rows = RowsOf(width);
  std::vector<uint64_t> scratch;
  std::vector<int32_t> out(kK);
  NthElementSelect(rows.one(0).scores, width, scratch, out.data());
  Check(state, rows.one(0), out);
  int r = 0;
  for (auto _ : state) {
    NthElementSelect(rows.one(r).scores, width, scratch, out.data());
    benchmark::DoNotOptimize(out.data());
    r = (r + 1) % kRowsInRotation;
  }
  state.SetItemsProcessed(state.iterations() * width);
}

void BM_PartialSort(benchmark::State& state) {
  const int64_t width = state.range(0);
  const Rows& rows = RowsOf(width);
  std::vector<int32_t> scratch;
  std::vector<int32_t> out(kK);
  PartialSortSelect(rows.one(0).scores, width, scratch, out.data());
  Check(state, rows.one(0), out);
  int r = 0;
  for (auto _ : state) {
    PartialSortSelect(rows.one(r).scores, width, scratch, out.data());
    benchmark::DoNotOptimize(out.data());
    r = (r + 1) % kRowsInRotation;
  }
  state.SetItemsProcessed(state.iterations() * width);
}

BENCHMARK(BM_CpuSelector)->Arg(128 * 1024)->Arg(1024 * 1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CpuSelectorExactRoute)
    ->Arg(128 * 1024)
    ->Arg(1024 * 1024)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NthElement)->Arg(128 * 1024)->Arg(1024 * 1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PartialSort)->Arg(128 * 1024)->Arg(1024 * 1024)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace topk

BENCHMARK_MAIN();
