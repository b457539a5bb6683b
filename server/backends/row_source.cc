#include "server/backends/row_source.h"

#include <cstring>

namespace topk::server {

void ContiguousRows::CopyRange(size_t offset, size_t bytes, std::byte* dest,
                               CopyStores stores) const {
  CopyBytes(dest, reinterpret_cast<const std::byte*>(bytes_.data()) + offset, bytes, stores);
}

const float* ContiguousRows::InPlaceHostFloats() const {
  if (reinterpret_cast<uintptr_t>(bytes_.data()) % alignof(float) != 0) return nullptr;
  return reinterpret_cast<const float*>(bytes_.data());
}

void RegionRows::CopyRange(size_t offset, size_t bytes, std::byte* dest, CopyStores stores) const {
  if (device_ordinal_ >= 0) {
    // Unreachable by construction (see the header). Should it ever happen,
    // all-NaN bytes make the request fail (kNan) instead of answering wrong.
    std::memset(dest, 0xff, bytes);
    return;
  }
  CopyBytes(dest, data_ + offset, bytes, stores);
}

const float* RegionRows::InPlaceHostFloats() const {
  if (device_ordinal_ >= 0 || reinterpret_cast<uintptr_t>(data_) % alignof(float) != 0) {
    return nullptr;
  }
  return reinterpret_cast<const float*>(data_);
}

const float* RegionRows::InPlaceDeviceFloats() const {
  return device_ordinal_ >= 0 ? reinterpret_cast<const float*>(data_) : nullptr;
}

const float* StageOnHost(const RowSource& rows, Staging staging_mode, std::byte* staging) {
  if (staging_mode == Staging::kInPlaceWhenPossible) {
    if (const float* in_place = rows.InPlaceHostFloats(); in_place != nullptr) return in_place;
  }
  rows.CopyRange(0, rows.size_bytes(), staging, CopyStores::kCached);
  return reinterpret_cast<const float*>(staging);
}

}  // namespace topk::server
