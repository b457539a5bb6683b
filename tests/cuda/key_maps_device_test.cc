// The device's key maps equal the host's: the hardware FP16 conversion used by
// Coarse on the GPU is bit-exact with the software definition on every FP32
// bit pattern (the CPU suite checks the software one against _Float16).
#include <cuda_runtime_api.h>

#include "gtest/gtest.h"
#include "key_maps_check.cuh"

namespace topk::cuda {
namespace {

TEST(KeyMapsOnDevice, HardwareHalfConversionMatchesTheDefinitionEverywhere) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    GTEST_SKIP() << "no CUDA device: the device key maps cannot be checked here";
  }
  unsigned long long* mismatches = nullptr;
  unsigned int* first = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&mismatches), sizeof(*mismatches)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&first), sizeof(*first)), cudaSuccess);
  ASSERT_EQ(cudaMemset(mismatches, 0, sizeof(*mismatches)), cudaSuccess);
  ASSERT_EQ(cudaMemset(first, 0xFF, sizeof(*first)), cudaSuccess);
  ASSERT_EQ(LaunchHalfConversionCheck(mismatches, first, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  unsigned long long count = 1;
  unsigned int first_bad = 0;
  ASSERT_EQ(cudaMemcpy(&count, mismatches, sizeof(count), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&first_bad, first, sizeof(first_bad), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(mismatches);
  cudaFree(first);
  EXPECT_EQ(count, 0u) << "first differing FP32 pattern: 0x" << std::hex << first_bad;
}

}  // namespace
}  // namespace topk::cuda
