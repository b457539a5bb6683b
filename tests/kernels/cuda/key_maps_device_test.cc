// The device's key maps equal the host's: the hardware FP16 conversion used by
// Coarse on the GPU is bit-exact with the software definition on every FP32
// bit pattern (the CPU suite checks the software one against _Float16); the
// 16-bit kernels' widening, NaN test, coarse bins, key order and cutoffs are
// those of keys.h on every BF16 and FP16 pattern.
#include <cuda_runtime_api.h>

#include <string>

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

TEST(KeyMapsOnDevice, SixteenBitRowViewMatchesKeysEverywhere) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    GTEST_SKIP() << "no CUDA device: the device key maps cannot be checked here";
  }
  const char* names[kNumScoreType16Checks] = {"scalar widening", "vector widening",   "NaN test",
                                              "coarse bin",      "key order",         "cutoff",
                                              "16-bit cutoff",   "closed-form cutoff"};
  for (int dtype : {1, 2}) {
    auto mismatches = AllocateDevice<unsigned long long>(kNumScoreType16Checks);
    auto first = AllocateDevice<unsigned int>(kNumScoreType16Checks);
    auto cutoffs = AllocateDevice<float>(4096);
    ASSERT_TRUE(mismatches.ok() && first.ok() && cutoffs.ok());
    ASSERT_EQ(cudaMemset(mismatches->get(), 0, mismatches->bytes()), cudaSuccess);
    ASSERT_EQ(cudaMemset(first->get(), 0xFF, first->bytes()), cudaSuccess);
    ASSERT_EQ(
        LaunchScoreType16Check(dtype, mismatches->get(), first->get(), cutoffs->get(), nullptr),
        cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    unsigned long long count[kNumScoreType16Checks];
    unsigned int first_bad[kNumScoreType16Checks];
    ASSERT_EQ(cudaMemcpy(count, mismatches->get(), sizeof(count), cudaMemcpyDeviceToHost),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(first_bad, first->get(), sizeof(first_bad), cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (int c = 0; c < kNumScoreType16Checks; ++c) {
      EXPECT_EQ(count[c], 0u) << (dtype == 1 ? "bf16 " : "fp16 ") << names[c]
                              << ": first differing pattern 0x" << std::hex << first_bad[c];
    }
  }
}

}  // namespace
}  // namespace topk::cuda
