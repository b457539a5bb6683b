#include "topk/client/cuda_channel.h"

#include <cuda.h>
#include <dlfcn.h>

#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "topk/cuda/status.h"

namespace topk::client {
namespace {

// The driver entry point, found at run time: the client links only the
// runtime, so that it loads (and fails clearly) on a host without a driver.
using BatchMemOp = CUresult (*)(CUstream, unsigned int, CUstreamBatchMemOpParams*, unsigned int);

absl::StatusOr<BatchMemOp> DriverBatchMemOp() {
  static std::once_flag once;
  static BatchMemOp entry = nullptr;
  std::call_once(once, [] {
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (driver != nullptr) {
      entry = reinterpret_cast<BatchMemOp>(dlsym(driver, "cuStreamBatchMemOp_v2"));
    }
  });
  if (entry == nullptr) {
    return absl::FailedPreconditionError(
        "channel calls on a stream need the CUDA driver's cuStreamBatchMemOp_v2 (libcuda.so.1)");
  }
  return entry;
}

// The block's device address; null (and no error left pending for the
// caller's next CUDA call) while it is not registered.
void* DeviceAlias(const Channel& channel) {
  void* device = nullptr;
  if (cudaHostGetDevicePointer(&device, channel.control(), 0) == cudaSuccess) return device;
  cudaGetLastError();
  return nullptr;
}

void Write64(CUstreamBatchMemOpParams& op, CUdeviceptr address, uint64_t value) {
  std::memset(&op, 0, sizeof(op));
  op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
  op.writeValue.address = address;
  op.writeValue.value64 = value;
}

void Write32(CUstreamBatchMemOpParams& op, CUdeviceptr address, uint32_t value) {
  std::memset(&op, 0, sizeof(op));
  op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  op.writeValue.address = address;
  op.writeValue.value = value;
}

}  // namespace

absl::Status RegisterChannelForStreams(const Channel& channel) {
  if (DeviceAlias(channel) != nullptr) return absl::OkStatus();
  TOPK_CUDA_RETURN_IF_ERROR(cudaHostRegister(channel.control(), TOPK_CHANNEL_CONTROL_BYTES,
                                             cudaHostRegisterMapped | cudaHostRegisterPortable));
  return absl::OkStatus();
}

absl::Status UnregisterChannelForStreams(const Channel& channel) {
  TOPK_CUDA_RETURN_IF_ERROR(cudaHostUnregister(channel.control()));
  return absl::OkStatus();
}

absl::Status EnqueueChannelCall(const Channel& channel, cudaStream_t stream,
                                const topk_channel_descriptor& call) {
  absl::StatusOr<BatchMemOp> batch = DriverBatchMemOp();
  if (!batch.ok()) return batch.status();
  const auto base = reinterpret_cast<CUdeviceptr>(DeviceAlias(channel));
  if (base == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("channel ", channel.id(), ": RegisterChannelForStreams first"));
  }
  static_assert(sizeof(topk_channel_descriptor) % 8 == 0);
  constexpr int kWords = sizeof(topk_channel_descriptor) / 8;
  uint64_t words[kWords];
  std::memcpy(words, &call, sizeof(call));
  CUstreamBatchMemOpParams ops[kWords + 3];
  for (int i = 0; i < kWords; ++i)
    Write64(ops[i], base + TOPK_CHANNEL_DESC_OFFSET + 8 * i, words[i]);
  Write32(ops[kWords], base + TOPK_CHANNEL_READY_OFFSET, 1);
  std::memset(&ops[kWords + 1], 0, sizeof(ops[0]));
  ops[kWords + 1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  ops[kWords + 1].waitValue.address = base + TOPK_CHANNEL_DONE_OFFSET;
  ops[kWords + 1].waitValue.value = 1;
  ops[kWords + 1].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
  Write32(ops[kWords + 2], base + TOPK_CHANNEL_DONE_OFFSET, 0);
  if (const CUresult r = (*batch)(reinterpret_cast<CUstream>(stream), kWords + 3, ops, 0);
      r != CUDA_SUCCESS) {
    return absl::InternalError(absl::StrCat("cuStreamBatchMemOp: CUDA driver error ", r));
  }
  return absl::OkStatus();
}

}  // namespace topk::client
