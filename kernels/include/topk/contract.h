// The operator contract of docs/design.md section 1: what a batch of rows looks like,
// what a selection must produce, and how the caller asks for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace topk {

// Sentinel written into the output slots a row of length L <= K cannot fill.
inline constexpr int32_t kEmptySlot = -1;

// Where row r starts.
enum class Layout : uint8_t {
  kPitched = 0,  // scores + r * pitch (pitch in elements, pitch >= width)
  kPacked = 1,   // scores + row_offsets[r] (ragged rows back to back)
};

// The element type of a batch's scores. Ordering, ties, -0/+0, +/-inf,
// subnormals and NaN follow the same rules in every type (docs/design.md
// section 1); indices are int32 whatever the type.
enum class ScoreType : uint8_t {
  kFloat32 = 0,   // IEEE binary32 (the default)
  kBFloat16 = 1,  // bfloat16: FP32's top 16 bits
  kFloat16 = 2,   // IEEE binary16
};

inline constexpr ScoreType kAllScoreTypes[] = {ScoreType::kFloat32, ScoreType::kBFloat16,
                                               ScoreType::kFloat16};

inline std::string_view ScoreTypeName(ScoreType type) {
  switch (type) {
    case ScoreType::kFloat32:
      return "fp32";
    case ScoreType::kBFloat16:
      return "bf16";
    case ScoreType::kFloat16:
      return "fp16";
  }
  return "unknown";
}

inline constexpr int ScoreTypeBytes(ScoreType type) { return type == ScoreType::kFloat32 ? 4 : 2; }

struct SelectOptions {
  // Output row sorted by value descending, ties by index ascending.
  bool sorted = false;
  // Ties at the K-th value go to the smallest indices, and the output of the
  // same input is bit-identical run to run (any thread count, any backend
  // route). Unsorted deterministic rows are in ascending index order.
  bool deterministic = false;
};

// A batch of rows. The memory space (host or device) is the backend's: the CPU
// backend reads host pointers, the CUDA backend device pointers. The scores
// live behind the one pointer that matches `dtype`: `scores` for FP32 (so FP32
// callers need not name the type), `scores16` for the 16-bit types; the other
// stays null. Pitch and offsets count elements of the batch's type.
struct RowBatch {
  const float* scores = nullptr;  // kFloat32
  Layout layout = Layout::kPitched;
  int64_t pitch = 0;                     // kPitched only, in elements
  const int64_t* row_offsets = nullptr;  // kPacked only, num_rows entries, in elements
  const int32_t* lengths = nullptr;      // num_rows valid lengths L_r, 0 <= L_r <= width
  int64_t num_rows = 0;                  // M
  int64_t width = 0;                     // N: the largest legal L_r
  ScoreType dtype = ScoreType::kFloat32;
  const uint16_t* scores16 = nullptr;  // kBFloat16 / kFloat16: raw 16-bit patterns

  // Where row r starts, in elements from the batch's first score.
  int64_t row_start(int64_t r) const {
    return layout == Layout::kPitched ? r * pitch : row_offsets[r];
  }
  // Row r of an FP32 batch.
  const float* row(int64_t r) const { return scores + row_start(r); }
  // Row r of a 16-bit batch.
  const uint16_t* row16(int64_t r) const { return scores16 + row_start(r); }
};

// Per-row outcome. A row with a status other than kOk has its output row
// filled with kEmptySlot; the caller decides whether the request fails.
enum class RowStatus : uint8_t {
  kOk = 0,
  kNan = 1,        // a NaN in the valid prefix [0, L_r)
  kBadLength = 2,  // L_r < 0 or L_r > width (device-side guard; hosts validate first)
};

// Where the selection goes. indices: num_rows x k, row-major, leading dimension k.
struct OutputView {
  int32_t* indices = nullptr;
  RowStatus* row_status = nullptr;  // optional: num_rows entries
};

}  // namespace topk
