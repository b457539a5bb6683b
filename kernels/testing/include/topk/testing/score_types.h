// Conversions between FP32 and the 16-bit score types for tests, generators
// and the oracle. These go through plain float arithmetic on purpose: the
// oracle and the verifier order 16-bit rows by their FP32 widenings, never by
// the selectors' 16-bit keys, so a wrong key map cannot hide behind itself.
#pragma once

#include <cstdint>
#include <vector>

#include "topk/contract.h"

namespace topk::testing {

// FP32 -> the 16-bit type (kBFloat16 or kFloat16), round to nearest even,
// overflow to infinity; NaN stays NaN.
uint16_t NarrowScore(float x, ScoreType type);

// The 16-bit pattern as FP32 (exact).
float WidenScore(uint16_t bits, ScoreType type);

// Row r's valid prefix as FP32: the row itself for FP32 batches, otherwise
// the widened values written into `buffer` (resized to `length`).
const float* RowAsFloats(const RowBatch& batch, int64_t r, int64_t length,
                         std::vector<float>& buffer);

}  // namespace topk::testing
