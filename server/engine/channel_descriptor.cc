#include "server/engine/channel_descriptor.h"

#include <algorithm>
#include <cstdint>

namespace topk::server {
namespace {

// A byte range of one call, in the executor's address space.
struct Extent {
  uintptr_t begin = 0;
  uintptr_t end = 0;  // exclusive; begin == end: empty
  bool Overlaps(const Extent& other) const {
    return begin < end && other.begin < other.end && begin < other.end && other.begin < end;
  }
};

CheckedCall Refuse(uint32_t status, int64_t value) {
  CheckedCall refused;
  refused.status = status;
  refused.value = value;
  return refused;
}

// offset + count * unit bytes inside a region of `size` bytes, without
// overflow (count and unit are at most 2^31 and 8, offset anything).
bool Fits(uint64_t offset, uint64_t count, uint64_t unit, uint64_t size) {
  if (offset > size) return false;
  const unsigned __int128 need = static_cast<unsigned __int128>(count) * unit;
  return need <= size - offset;
}

}  // namespace

CheckedCall CheckChannelCall(const topk_channel_descriptor& d, const ChannelSpec& spec,
                             absl::Span<const ChannelRegionView> regions) {
  const int64_t m = d.num_rows;
  if (m > spec.max_rows) return Refuse(TOPK_CHANNEL_BAD_NUM_ROWS, m);
  const uint32_t count = static_cast<uint32_t>(regions.size());
  for (uint32_t index : {d.scores_region, d.lengths_region, d.indices_region}) {
    if (index >= count) return Refuse(TOPK_CHANNEL_BAD_REGION, index);
  }
  const bool values_named = d.values_region != TOPK_CHANNEL_NO_REGION;
  if (values_named != spec.return_values || (values_named && d.values_region >= count) ||
      d.reserved != 0) {
    return Refuse(TOPK_CHANNEL_BAD_REGION, d.values_region);
  }
  CheckedCall checked;
  if (m == 0) return checked;  // nothing to read or write

  const uint64_t element = ScoreTypeBytes(spec.dtype);
  const int32_t k = spec.k;
  // One row: its extent is the channel's width. More: rows start row_pitch
  // apart, and a row may not run into the next one (lengths above the
  // pitch are refused on the device, as those above N_cap).
  uint64_t width = static_cast<uint64_t>(spec.max_width);
  uint64_t pitch = width;
  if (m > 1) {
    if (d.row_pitch < 1 || d.row_pitch > (uint64_t{1} << 40)) {
      return Refuse(TOPK_CHANNEL_BAD_ROW_PITCH, static_cast<int64_t>(d.row_pitch));
    }
    pitch = d.row_pitch;
    width = std::min(width, pitch);
  }
  const uint64_t stride = d.out_row_stride == 0 ? static_cast<uint64_t>(k) : d.out_row_stride;
  if (stride < static_cast<uint64_t>(k) || stride > (uint64_t{1} << 40)) {
    return Refuse(TOPK_CHANNEL_BAD_ROW_STRIDE, static_cast<int64_t>(d.out_row_stride));
  }

  const ChannelRegionView& scores = regions[d.scores_region];
  const ChannelRegionView& lengths = regions[d.lengths_region];
  const ChannelRegionView& indices = regions[d.indices_region];
  auto misaligned = [](const ChannelRegionView& region, uint64_t offset, uint64_t unit) {
    return (reinterpret_cast<uintptr_t>(region.data) + offset) % unit != 0;
  };
  if (misaligned(scores, d.scores_offset, element)) {
    return Refuse(TOPK_CHANNEL_MISALIGNED, static_cast<int64_t>(d.scores_offset));
  }
  const uint64_t row_elements = static_cast<uint64_t>(m - 1) * pitch + width;
  if (!Fits(d.scores_offset, row_elements, element, scores.byte_size)) {
    return Refuse(TOPK_CHANNEL_BAD_SCORES, static_cast<int64_t>(d.scores_offset));
  }
  if (misaligned(lengths, d.lengths_offset, sizeof(int32_t))) {
    return Refuse(TOPK_CHANNEL_MISALIGNED, static_cast<int64_t>(d.lengths_offset));
  }
  if (!Fits(d.lengths_offset, m, sizeof(int32_t), lengths.byte_size)) {
    return Refuse(TOPK_CHANNEL_BAD_LENGTHS, static_cast<int64_t>(d.lengths_offset));
  }
  const uint64_t out_elements = static_cast<uint64_t>(m - 1) * stride + k;
  if (misaligned(indices, d.indices_offset, sizeof(int32_t))) {
    return Refuse(TOPK_CHANNEL_MISALIGNED, static_cast<int64_t>(d.indices_offset));
  }
  if (!Fits(d.indices_offset, out_elements, sizeof(int32_t), indices.byte_size)) {
    return Refuse(TOPK_CHANNEL_BAD_INDICES, static_cast<int64_t>(d.indices_offset));
  }
  auto extent = [](const ChannelRegionView& region, uint64_t offset, uint64_t bytes) {
    const uintptr_t begin = reinterpret_cast<uintptr_t>(region.data) + offset;
    return Extent{begin, begin + bytes};
  };
  const Extent rows_extent = extent(scores, d.scores_offset, row_elements * element);
  const Extent lengths_extent = extent(lengths, d.lengths_offset, m * sizeof(int32_t));
  const Extent indices_extent = extent(indices, d.indices_offset, out_elements * sizeof(int32_t));
  Extent values_extent;
  if (values_named) {
    const ChannelRegionView& values = regions[d.values_region];
    if (misaligned(values, d.values_offset, element)) {
      return Refuse(TOPK_CHANNEL_MISALIGNED, static_cast<int64_t>(d.values_offset));
    }
    if (!Fits(d.values_offset, out_elements, element, values.byte_size)) {
      return Refuse(TOPK_CHANNEL_BAD_VALUES, static_cast<int64_t>(d.values_offset));
    }
    values_extent = extent(values, d.values_offset, out_elements * element);
    checked.call.values = values.data + d.values_offset;
  }
  for (const Extent& out : {indices_extent, values_extent}) {
    if (out.Overlaps(rows_extent) || out.Overlaps(lengths_extent)) {
      return Refuse(TOPK_CHANNEL_OVERLAP, static_cast<int64_t>(out.begin - indices_extent.begin));
    }
  }
  if (indices_extent.Overlaps(values_extent)) {
    return Refuse(TOPK_CHANNEL_OVERLAP, static_cast<int64_t>(d.values_offset));
  }

  checked.call.scores = scores.data + d.scores_offset;
  checked.call.row_pitch = static_cast<int64_t>(pitch);
  checked.call.width = static_cast<int64_t>(width);
  checked.call.lengths = reinterpret_cast<const int32_t*>(lengths.data + d.lengths_offset);
  checked.call.num_rows = m;
  checked.call.indices = reinterpret_cast<int32_t*>(indices.data + d.indices_offset);
  checked.call.out_row_stride = static_cast<int64_t>(stride);
  return checked;
}

}  // namespace topk::server
