#include "server/regions/region.h"

namespace topk::server {

absl::string_view RegionKindName(RegionKind kind) {
  switch (kind) {
    case RegionKind::kShm:
      return "shm";
    case RegionKind::kCudaIpc:
      return "cuda_ipc";
    case RegionKind::kCudaEvent:
      return "cuda_event";
  }
  return "unknown";
}

absl::Status Region::CopyOut(uint64_t /*offset*/, size_t /*bytes*/, void* /*dest*/) const {
  return absl::InvalidArgumentError("an event region holds no bytes");
}

}  // namespace topk::server
