// The operator contract of docs/design.md section 1: what a batch of rows looks like,
// what a selection must produce, and how the caller asks for it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace topk {

// Sentinel written into the output slots a row of length L <= K cannot fill.
inline constexpr int32_t kEmptySlot = -1;

// Where row r starts.
enum class Layout : uint8_t {
  kPitched = 0,  // scores + r * pitch (pitch in elements, pitch >= width)
  kPacked = 1,   // scores + row_offsets[r] (ragged rows back to back)
};

struct SelectOptions {
  // Output row sorted by value descending, ties by index ascending.
  bool sorted = false;
  // Ties at the K-th value go to the smallest indices, and the output of the
  // same input is bit-identical run to run (any thread count, any backend
  // route). Unsorted deterministic rows are in ascending index order.
  bool deterministic = false;
};

// A batch of rows. The memory space (host or device) is the backend's: the CPU
// backend reads host pointers, the CUDA backend device pointers.
struct RowBatch {
  const float* scores = nullptr;
  Layout layout = Layout::kPitched;
  int64_t pitch = 0;                     // kPitched only, in elements
  const int64_t* row_offsets = nullptr;  // kPacked only, num_rows entries, in elements
  const int32_t* lengths = nullptr;      // num_rows valid lengths L_r, 0 <= L_r <= width
  int64_t num_rows = 0;                  // M
  int64_t width = 0;                     // N: the largest legal L_r

  const float* row(int64_t r) const {
    return layout == Layout::kPitched ? scores + r * pitch : scores + row_offsets[r];
  }
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
