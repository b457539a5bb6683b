// What the CPU row selector needs to know about a score type: how an element
// is stored, keyed for the refinement, binned for the proposal, and compared
// with a threshold: a Rank whose order is the value order (the float itself
// for FP32, Rank16 for the 16-bit types: integer compares, no widening), and
// CutoffRank(b), the threshold that admits exactly the coarse bins <= b. One
// struct per ScoreType.
#pragma once

#include <cstdint>

#include "topk/contract.h"
#include "topk/keys.h"

namespace topk::cpu {

struct Fp32Scores {
  using Storage = float;
  static constexpr ScoreType kType = ScoreType::kFloat32;
  // Refinement digits of Key (11/11/10 over 32 bits).
  static constexpr int kRefineDigits = 3;
  using Rank = float;  // NaN compares false with everything
  static bool IsNan(float x) { return topk::IsNan(x); }
  static float RankOf(float x) { return x; }
  static float CutoffRank(uint32_t b) { return topk::CoarseCutoff(b); }
  static uint32_t Key(float x) { return Key32(x); }
  static uint32_t Coarse(float x) { return topk::Coarse(x); }
};

// The 16-bit types key into the top half of a 32-bit key, so the 11/11/10
// refinement runs unchanged: two digits cover the 16 key bits, and the third
// (all zero) is skipped. Their
// ranks do not order NaN below everything: callers mask NaN first.
struct Bf16Scores {
  using Storage = uint16_t;
  static constexpr ScoreType kType = ScoreType::kBFloat16;
  static constexpr int kRefineDigits = 2;
  using Rank = int32_t;
  static constexpr uint16_t kInfMagnitude = 0x7F80u;
  static bool IsNan(uint16_t h) { return IsBf16Nan(h); }
  static int32_t RankOf(uint16_t h) { return Rank16(h); }
  static int32_t CutoffRank(uint32_t b) { return Rank16(CoarseCutoffBitsBf16(b)); }
  static uint32_t Key(uint16_t h) { return Key16(h) << 16; }
  static uint32_t Coarse(uint16_t h) { return CoarseOfBf16(h); }
};

struct Fp16Scores {
  using Storage = uint16_t;
  static constexpr ScoreType kType = ScoreType::kFloat16;
  static constexpr int kRefineDigits = 2;
  using Rank = int32_t;
  static constexpr uint16_t kInfMagnitude = 0x7C00u;
  static bool IsNan(uint16_t h) { return IsFp16Nan(h); }
  static int32_t RankOf(uint16_t h) { return Rank16(h); }
  static int32_t CutoffRank(uint32_t b) { return Rank16(CoarseCutoffBitsFp16(b)); }
  static uint32_t Key(uint16_t h) { return Key16(h) << 16; }
  static uint32_t Coarse(uint16_t h) { return CoarseOfFp16(h); }
};

}  // namespace topk::cpu
