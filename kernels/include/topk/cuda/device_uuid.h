// A GPU's UUID as nvidia-smi and torch print it ("GPU-xxxxxxxx-xxxx-..."):
// the one name of a device that processes with different
// CUDA_VISIBLE_DEVICES agree on.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace topk::cuda {

inline std::string DeviceUuidString(const cudaUUID_t& uuid) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    const auto byte = static_cast<unsigned char>(uuid.bytes[i]);
    out += kHex[byte >> 4];
    out += kHex[byte & 15];
  }
  return out;
}

}  // namespace topk::cuda
