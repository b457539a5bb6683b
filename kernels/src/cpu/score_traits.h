// What the CPU row selector needs to know about a score type: how an element
// is stored, widened to FP32 (exactly, so raw float compares keep working),
// keyed for the refinement and binned for the proposal, and which bins of the
// coarse map a threshold may name. One struct per ScoreType.
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
  static float Widen(float x) { return x; }
  static bool IsNan(float x) { return topk::IsNan(x); }
  static uint32_t Key(float x) { return Key32(x); }
  static uint32_t Coarse(float x) { return topk::Coarse(x); }
  static float CoarseCutoff(uint32_t b) { return topk::CoarseCutoff(b); }
};

// The 16-bit types key into the top half of a 32-bit key, so the 11/11/10
// refinement runs unchanged: its first digit is the coarse bin, the second
// holds the 5 remaining key bits, and the third (all zero) is skipped.
struct Bf16Scores {
  using Storage = uint16_t;
  static constexpr ScoreType kType = ScoreType::kBFloat16;
  static constexpr int kRefineDigits = 2;
  static float Widen(uint16_t h) { return Bf16BitsToFloat(h); }
  static bool IsNan(uint16_t h) { return IsBf16Nan(h); }
  static uint32_t Key(uint16_t h) { return Key16(h) << 16; }
  static uint32_t Coarse(uint16_t h) { return Coarse16(h); }
  static float CoarseCutoff(uint32_t b) { return Coarse16CutoffBf16(b); }
};

struct Fp16Scores {
  using Storage = uint16_t;
  static constexpr ScoreType kType = ScoreType::kFloat16;
  static constexpr int kRefineDigits = 2;
  static float Widen(uint16_t h) { return Fp16BitsToFloat(h); }
  static bool IsNan(uint16_t h) { return IsFp16Nan(h); }
  static uint32_t Key(uint16_t h) { return Key16(h) << 16; }
  static uint32_t Coarse(uint16_t h) { return Coarse16(h); }
  static float CoarseCutoff(uint32_t b) { return Coarse16CutoffFp16(b); }
};

}  // namespace topk::cpu
