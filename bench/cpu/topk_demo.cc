// Interim demo: selects on generated indexer-like rows with the CPU selector,
// verifies every output, and prints one table line per shape.
#include <chrono>
#include <cstdio>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "topk/cpu_selector.h"
#include "topk/testing/generators.h"
#include "topk/testing/verifier.h"

ABSL_FLAG(int32_t, k, 2048, "rank K");
ABSL_FLAG(int, threads, 0, "worker threads (0: all cores)");
ABSL_FLAG(int, repeats, 3, "timed runs per shape (the best is reported)");

namespace {

struct Shape {
  int64_t rows;
  int64_t width;
};

bool RunShape(topk::CpuSelector& selector, const Shape& shape, int32_t k, int repeats) {
  topk::testing::GeneratorSpec spec{.distribution = topk::testing::Distribution::kIndexer,
                                    .lengths = topk::testing::LengthPattern::kCausalTerminal,
                                    .rows = shape.rows,
                                    .width = shape.width,
                                    .k = k,
                                    .seed = 1};
  const topk::testing::ScoreMatrix m = topk::testing::Generate(spec);
  absl::StatusOr<topk::Plan> plan =
      selector.MakePlan({k, shape.rows, shape.width, topk::Layout::kPitched}, {});
  if (!plan.ok()) {
    absl::FPrintF(stderr, "plan: %s\n", plan.status().ToString());
    return false;
  }
  std::vector<int32_t> out(shape.rows * k);
  std::vector<topk::RowStatus> status(shape.rows);
  double best = 1e30;
  for (int rep = 0; rep < repeats; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    const absl::Status s = selector.Run(*plan, m.batch(), {out.data(), status.data()}, {});
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!s.ok()) {
      absl::FPrintF(stderr, "run: %s\n", s.ToString());
      return false;
    }
    best = std::min(best, seconds);
  }
  const absl::Status exact =
      topk::testing::VerifySelection(m.batch(), k, {}, out.data(), status.data());
  const topk::CpuRouteStats stats = selector.last_run_stats();
  absl::PrintF("%6d %9d %6d %10.3f %12.0f %6s   %d/%d/%d\n", shape.rows, shape.width, k, best * 1e3,
               shape.rows / best, exact.ok() ? "yes" : "NO", stats.certified, stats.band_rescued,
               stats.exact_recovery);
  if (!exact.ok()) absl::FPrintF(stderr, "verify: %s\n", exact.ToString());
  return exact.ok();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int32_t k = absl::GetFlag(FLAGS_k);
  topk::CpuSelector selector(topk::CpuSelectorConfig{.threads = absl::GetFlag(FLAGS_threads)});
  const Shape shapes[] = {{64, 32 * 1024}, {64, 128 * 1024}, {16, 1024 * 1024}};
  absl::PrintF("CPU selector, indexer-like causal rows (certified/rescued/recovered per run)\n");
  absl::PrintF("%6s %9s %6s %10s %12s %6s   %s\n", "rows", "N", "K", "ms", "rows/s", "exact",
               "routes");
  bool ok = true;
  for (const Shape& shape : shapes)
    ok &= RunShape(selector, shape, k, absl::GetFlag(FLAGS_repeats));
  return ok ? 0 : 1;
}
