// The device's key maps equal the host's: the hardware FP16 conversion used by
// Coarse on the GPU is bit-exact with the software definition on every FP32
// bit pattern (the CPU suite checks the software one against _Float16).
#include <cuda_runtime_api.h>

#include "gtest/gtest.h"
#include "key_maps_check.cuh"
#include "topk/cuda/resources.h"

namespace topk::cuda {
namespace {

TEST(KeyMapsOnDevice, HardwareHalfConversionMatchesTheDefinitionEverywhere) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    GTEST_SKIP() << "no CUDA device: the device key maps cannot be checked here";
  }
  auto mismatches = AllocateDevice<unsigned long long>(1);
  auto first = AllocateDevice<unsigned int>(1);
  ASSERT_TRUE(mismatches.ok() && first.ok());
  ASSERT_EQ(cudaMemset(mismatches->get(), 0, mismatches->bytes()), cudaSuccess);
  ASSERT_EQ(cudaMemset(first->get(), 0xFF, first->bytes()), cudaSuccess);
  ASSERT_EQ(LaunchHalfConversionCheck(mismatches->get(), first->get(), nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  unsigned long long count = 1;
  unsigned int first_bad = 0;
  ASSERT_EQ(cudaMemcpy(&count, mismatches->get(), sizeof(count), cudaMemcpyDeviceToHost),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&first_bad, first->get(), sizeof(first_bad), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(count, 0u) << "first differing FP32 pattern: 0x" << std::hex << first_bad;
}

}  // namespace
}  // namespace topk::cuda
