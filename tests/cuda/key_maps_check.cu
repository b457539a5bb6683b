#include "key_maps_check.cuh"
#include "topk/keys.h"

namespace topk::cuda {
namespace {

__global__ void HalfConversionCheckKernel(unsigned long long* mismatches, unsigned int* first) {
  unsigned long long local = 0;
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t u = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; u <= 0xFFFFFFFFull;
       u += stride) {
    const float f = BitsToFloat(static_cast<uint32_t>(u));
    if (HalfBitsRoundNearest(f) != HalfBitsRoundNearestSoftware(f)) {
      ++local;
      atomicMin(first, static_cast<unsigned int>(u));
    }
  }
  if (local != 0) atomicAdd(mismatches, local);
}

}  // namespace

cudaError_t LaunchHalfConversionCheck(unsigned long long* mismatches, unsigned int* first,
                                      cudaStream_t stream) {
  HalfConversionCheckKernel<<<1024, 256, 0, stream>>>(mismatches, first);
  return cudaGetLastError();
}

}  // namespace topk::cuda
