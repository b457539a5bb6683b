#include "topk/testing/score_types.h"

#include "topk/keys.h"

namespace topk::testing {

uint16_t NarrowScore(float x, ScoreType type) {
  return type == ScoreType::kBFloat16 ? Bf16BitsRoundNearest(x) : HalfBitsRoundNearestSoftware(x);
}

float WidenScore(uint16_t bits, ScoreType type) {
  return type == ScoreType::kBFloat16 ? Bf16BitsToFloat(bits) : Fp16BitsToFloat(bits);
}

const float* RowAsFloats(const RowBatch& batch, int64_t r, int64_t length,
                         std::vector<float>& buffer) {
  if (batch.dtype == ScoreType::kFloat32) return batch.row(r);
  const uint16_t* row = batch.row16(r);
  buffer.resize(length);
  for (int64_t i = 0; i < length; ++i) buffer[i] = WidenScore(row[i], batch.dtype);
  return buffer.data();
}

}  // namespace topk::testing
