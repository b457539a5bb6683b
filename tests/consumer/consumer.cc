// Uses the installed library through its public headers only: selects the
// top-K of a few ragged rows on the CPU selector and checks them against a
// full sort; with CUDA, also links the CUDA selector and the C ABI.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "topk/contract.h"
#include "topk/cpu_selector.h"
#include "topk/selector.h"
#ifdef TOPK_CONSUMER_WITH_CUDA
#include "topk/cuda_selector.h"
#include "topk/topk_c.h"
#endif

namespace {

// The k-th largest value of a row: every selected index must hold a value
// >= it, and the selection must hold exactly min(k, length) distinct indices.
bool RowIsExact(const std::vector<float>& row, const int32_t* selected, int32_t k) {
  const int64_t length = static_cast<int64_t>(row.size());
  const int64_t want = std::min<int64_t>(k, length);
  std::vector<float> sorted = row;
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  std::vector<bool> seen(length, false);
  for (int32_t j = 0; j < k; ++j) {
    const int32_t index = selected[j];
    if (j >= want) {
      if (index != topk::kEmptySlot) return false;
      continue;
    }
    if (index < 0 || index >= length || seen[index]) return false;
    seen[index] = true;
    if (row[index] < sorted[want - 1]) return false;
  }
  return true;
}

}  // namespace

int main() {
  constexpr int32_t kK = 64;
  const std::vector<int32_t> lengths = {5000, 40, 12345};
  const int64_t width = 12345;
  std::mt19937 rng(7);
  std::normal_distribution<float> score(0.0f, 1.0f);
  std::vector<float> scores(lengths.size() * width, -1.0f);
  for (size_t r = 0; r < lengths.size(); ++r) {
    for (int32_t i = 0; i < lengths[r]; ++i) scores[r * width + i] = score(rng);
  }

  topk::CpuSelector selector;
  const topk::ProblemShape shape{.k = kK,
                                 .max_rows = static_cast<int64_t>(lengths.size()),
                                 .max_width = width,
                                 .layout = topk::Layout::kPitched};
  absl::StatusOr<topk::Plan> plan = selector.MakePlan(shape, topk::SelectOptions{});
  if (!plan.ok()) {
    std::fprintf(stderr, "MakePlan: %s\n", plan.status().ToString().c_str());
    return 1;
  }
  const topk::RowBatch batch{.scores = scores.data(),
                             .layout = topk::Layout::kPitched,
                             .pitch = width,
                             .lengths = lengths.data(),
                             .num_rows = static_cast<int64_t>(lengths.size()),
                             .width = width};
  std::vector<int32_t> indices(lengths.size() * kK);
  absl::Status run =
      selector.Run(*plan, batch, topk::OutputView{.indices = indices.data()}, topk::RunContext{});
  if (!run.ok()) {
    std::fprintf(stderr, "Run: %s\n", run.ToString().c_str());
    return 1;
  }
  for (size_t r = 0; r < lengths.size(); ++r) {
    const std::vector<float> row(scores.begin() + r * width,
                                 scores.begin() + r * width + lengths[r]);
    if (!RowIsExact(row, indices.data() + r * kK, kK)) {
      std::fprintf(stderr, "row %zu: the selection is not the top-%d\n", r, kK);
      return 1;
    }
  }
  std::printf("topk::core: %zu rows exact\n", lengths.size());

#ifdef TOPK_CONSUMER_WITH_CUDA
  if (topk_api_version() != TOPK_C_API_VERSION) {
    std::fprintf(stderr, "topk::c: API version %d, header says %d\n", topk_api_version(),
                 TOPK_C_API_VERSION);
    return 1;
  }
  // Without a GPU the selector reports that (an error status), which is what
  // a consumer on a CPU-only host sees; with one it is created.
  absl::StatusOr<std::unique_ptr<topk::CudaSelector>> cuda =
      topk::CudaSelector::Create(topk::CudaSelectorConfig{});
  std::printf("topk::cuda: %s; topk::c: API version %d\n",
              cuda.ok() ? "device selector created" : cuda.status().ToString().c_str(),
              topk_api_version());
#endif
  return 0;
}
