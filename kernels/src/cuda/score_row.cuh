// A row of scores as every phase reads it: a typed view over device memory
// that hands out FP32 values. BF16 and FP16 widen to FP32 exactly and in
// order (NaN stays NaN, -0 stays -0), so the phases compare, key, bin and
// certify the widened values with the FP32 code and the 16-bit kernels give
// the answer of the same row widened to FP32. Coarse(widen(h)) equals the
// 16-bit coarse maps of keys.h (for FP16 the top 11 bits of Key16), so the
// proposal's bins are as sharp as the CPU's on every type.
//
// Two views, so each kernel has two instantiations, not three: F32Row and
// Half16Row (BF16 or FP16 by a CTA-uniform flag; the streaming loop branches
// on it once per row, not per value).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernel_args.h"
#include "topk/contract.h"
#include "topk/keys.h"

namespace topk::cuda {

// FP32 rows: 4 values per 16-byte load.
struct F32Row {
  static constexpr uint32_t kPerLoad = 4;
  static constexpr uint32_t kBytes = 4;
  const float* p;

  __device__ __forceinline__ float At(uint32_t i) const { return __ldcg(p + i); }
  // The row from position n on (a KV-split segment).
  __device__ __forceinline__ F32Row From(uint32_t n) const { return F32Row{p + n}; }
  __device__ __forceinline__ const void* Address(uint32_t i) const { return p + i; }
  // Low key bits that every value's Key32 has fixed by its sign: none.
  __device__ __forceinline__ int ConstantKeyBits() const { return 0; }
};

// BF16 (fp16 == 0) or FP16 (fp16 == 1) rows: 8 values per 16-byte load.
struct Half16Row {
  static constexpr uint32_t kPerLoad = 8;
  static constexpr uint32_t kBytes = 2;
  const uint16_t* p;
  uint32_t fp16;

  // BF16 is FP32's top half; FP16 -> FP32 is one exact conversion.
  __device__ __forceinline__ static float WidenBf16(uint32_t h) { return __uint_as_float(h << 16); }
  __device__ __forceinline__ static float WidenFp16(uint32_t h) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
  }
  __device__ __forceinline__ float Widen(uint32_t h) const {
    return fp16 ? WidenFp16(h) : WidenBf16(h);
  }
  __device__ __forceinline__ float At(uint32_t i) const {
    return Widen(__ldcg(reinterpret_cast<const unsigned short*>(p) + i));
  }
  __device__ __forceinline__ Half16Row From(uint32_t n) const { return Half16Row{p + n, fp16}; }
  __device__ __forceinline__ const void* Address(uint32_t i) const { return p + i; }
  // The widened value's low 16 (BF16) or 13 (FP16) bits are zero, so its
  // Key32 ends in that many ones (positive) or zeros (negative): two keys
  // that agree above them are equal.
  __device__ __forceinline__ int ConstantKeyBits() const { return fp16 ? 13 : 16; }
};

// The 16-bit views with the type fixed at compile time, for loops that
// dispatch on Half16Row::fp16 once (WithTypedRow) rather than per value.
struct Bf16Row {
  const uint16_t* p;
  __device__ __forceinline__ float At(uint32_t i) const {
    return Half16Row::WidenBf16(__ldcg(reinterpret_cast<const unsigned short*>(p) + i));
  }
};
struct Fp16Row {
  const uint16_t* p;
  __device__ __forceinline__ float At(uint32_t i) const {
    return Half16Row::WidenFp16(__ldcg(reinterpret_cast<const unsigned short*>(p) + i));
  }
};

// Calls f with the row as a view whose element type is a compile-time fact.
template <typename F>
__device__ __forceinline__ void WithTypedRow(const F32Row& row, F&& f) {
  f(row);
}
template <typename F>
__device__ __forceinline__ void WithTypedRow(const Half16Row& row, F&& f) {
  if (row.fp16) {
    f(Fp16Row{row.p});
  } else {
    f(Bf16Row{row.p});
  }
}

// The view of a launch's rows: Half16Row for the 16-bit types.
template <typename Row>
struct RowFactory;
template <>
struct RowFactory<F32Row> {
  __device__ __forceinline__ static F32Row Make(const void* scores, int64_t start, int32_t) {
    return F32Row{static_cast<const float*>(scores) + start};
  }
};
template <>
struct RowFactory<Half16Row> {
  __device__ __forceinline__ static Half16Row Make(const void* scores, int64_t start,
                                                   int32_t dtype) {
    return Half16Row{static_cast<const uint16_t*>(scores) + start,
                     dtype == static_cast<int32_t>(ScoreType::kFloat16) ? 1u : 0u};
  }
};

// Row r of a launch in either layout.
template <typename Row>
__device__ __forceinline__ Row RowOf(const DeviceArgs& a, const KernelParams& p, int64_t r) {
  const int64_t start =
      a.layout == static_cast<int32_t>(Layout::kPitched) ? r * a.pitch : a.row_offsets[r];
  return RowFactory<Row>::Make(a.scores, start, p.dtype);
}

// Elements before the first 16-byte boundary of a row (the scalar head).
template <typename Row>
__device__ __forceinline__ uint32_t HeadElements(const Row& row, uint32_t L) {
  const uint32_t bytes_to_boundary =
      (16u - (static_cast<uint32_t>(reinterpret_cast<uintptr_t>(row.p)) & 15u)) & 15u;
  return min(L, bytes_to_boundary / Row::kBytes);
}

}  // namespace topk::cuda
