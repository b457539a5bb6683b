// Device-side check of the key maps: the GPU's hardware FP16 conversion
// against the software definition in keys.h, over every FP32 bit pattern.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace topk::cuda {

// Counts the FP32 bit patterns whose HalfBitsRoundNearest (hardware on the
// device) differs from HalfBitsRoundNearestSoftware, and the smallest such
// pattern. Both outputs are device pointers; the caller zeroes *mismatches and
// sets *first to 0xFFFFFFFF before the launch.
cudaError_t LaunchHalfConversionCheck(unsigned long long* mismatches, unsigned int* first,
                                      cudaStream_t stream);

}  // namespace topk::cuda
