// The total order the contract's sorted/deterministic modes use: value
// descending (as key32, so -0.0 ties +0.0), ties by ascending index.
#pragma once

#include <cstdint>

#include "topk/keys.h"

namespace topk::testing {

struct ByValueThenIndex {
  const float* row;
  bool operator()(int32_t a, int32_t b) const {
    const uint32_t ka = Key32(row[a]);
    const uint32_t kb = Key32(row[b]);
    return ka != kb ? ka < kb : a < b;
  }
};

// True when the valid prefix holds a NaN.
inline bool PrefixHasNan(const float* row, int64_t length) {
  for (int64_t i = 0; i < length; ++i) {
    if (IsNan(row[i])) return true;
  }
  return false;
}

}  // namespace topk::testing
