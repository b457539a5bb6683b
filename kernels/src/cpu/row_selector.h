// The per-row three-phase selection of docs/design.md section 2 on one host thread.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "score_traits.h"
#include "topk/contract.h"
#include "topk/keys.h"

namespace topk::cpu {

// One worker's scratch. Sized by the plan's max_width, never by the row count.
struct RowScratch {
  std::vector<int32_t> ping;  // candidates, then frontiers (ping-pong)
  std::vector<int32_t> pong;
  std::vector<uint32_t> keys;  // 32-bit keys of the frontier, parallel to it (ping-pong halves)
  std::array<uint32_t, kCoarseBins> histogram;

  void Reserve(int64_t width);
  uint32_t* KeysA() { return keys.data(); }
  uint32_t* KeysB() { return keys.data() + keys.size() / 2; }
  static size_t BytesFor(int64_t width) {
    return 4 * static_cast<size_t>(width) * sizeof(int32_t) + sizeof(histogram);
  }
};

struct RowParams {
  int32_t k = 1;
  bool sampling = true;  // false: every long row takes exact coarse recovery
  int32_t stride = 64;
  bool sorted = false;
  bool deterministic = false;
};

// Which path a row took (summed into CpuRouteStats).
enum class RowPath : uint8_t { kShort, kCertified, kBandRescued, kExactRecovery };

struct RowResult {
  RowStatus status = RowStatus::kOk;
  RowPath path = RowPath::kShort;
  int64_t candidates = 0;  // certified candidate count (sampled paths)
};

// Selects the top-k of x[0, length) into out[0, k); Scores is one of
// Fp32Scores, Bf16Scores, Fp16Scores (score_traits.h). `row` is the row's
// batch index: it fixes the strided view's phase. The result depends on
// nothing else (no thread or timing input), so any thread count gives the
// same bits.
template <typename Scores>
RowResult SelectRow(const typename Scores::Storage* x, int32_t length, int64_t row,
                    const RowParams& params, int32_t* out, RowScratch& scratch);

}  // namespace topk::cpu
