// The host's check of a channel descriptor (server/engine/channel_descriptor.h)
// as a pure function, no server: the bounds at their edges, offsets whose
// arithmetic would overflow, the row bound a pitch implies, the values rule,
// and outputs that alias an input through two region entries.
#include "server/engine/channel_descriptor.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace topk::server {
namespace {

constexpr int32_t kK = 16;
constexpr int64_t kRows = 4;
constexpr int64_t kWidth = 100;

class ChannelDescriptor : public ::testing::Test {
 protected:
  // One region of 64 KiB, 64-byte aligned: rows at 0, lengths at 8192,
  // indices at 16384, values at 32768.
  ChannelDescriptor() : memory_(65536 / 8 + 8) {
    base_ =
        reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(memory_.data()) + 63) / 64 * 64);
    regions_ = {{.data = base_, .byte_size = 65536}};
    spec_ = {.k = kK, .max_rows = kRows, .max_width = kWidth};
  }

  topk_channel_descriptor Valid() const {
    return {.num_rows = kRows,
            .values_region = TOPK_CHANNEL_NO_REGION,
            .row_pitch = kWidth,
            .lengths_offset = 8192,
            .indices_offset = 16384};
  }

  CheckedCall Check(const topk_channel_descriptor& d) const {
    return CheckChannelCall(d, spec_, regions_);
  }

  std::vector<uint64_t> memory_;
  std::byte* base_ = nullptr;
  std::vector<ChannelRegionView> regions_;
  ChannelSpec spec_;
};

TEST_F(ChannelDescriptor, ValidCallResolvesEveryPointer) {
  const CheckedCall c = Check(Valid());
  ASSERT_EQ(c.status, TOPK_CHANNEL_OK);
  EXPECT_EQ(c.call.scores, base_);
  EXPECT_EQ(reinterpret_cast<const std::byte*>(c.call.lengths), base_ + 8192);
  EXPECT_EQ(reinterpret_cast<std::byte*>(c.call.indices), base_ + 16384);
  EXPECT_EQ(c.call.num_rows, kRows);
  EXPECT_EQ(c.call.row_pitch, kWidth);
  EXPECT_EQ(c.call.width, kWidth);
  EXPECT_EQ(c.call.out_row_stride, kK);  // 0 means K
  EXPECT_EQ(c.call.values, nullptr);
}

TEST_F(ChannelDescriptor, NoRowsTouchesNothing) {
  topk_channel_descriptor d = Valid();
  d.num_rows = 0;
  d.scores_offset = ~uint64_t{0};  // never looked at: nothing is read
  const CheckedCall c = Check(d);
  EXPECT_EQ(c.status, TOPK_CHANNEL_OK);
  EXPECT_EQ(c.call.num_rows, 0);
}

TEST_F(ChannelDescriptor, PitchBoundsEveryLength) {
  topk_channel_descriptor d = Valid();
  d.row_pitch = 40;  // narrower than N_cap: lengths above 40 are refused on the device
  EXPECT_EQ(Check(d).call.width, 40);
  d.num_rows = 1;
  d.row_pitch = 0;  // one row without a pitch: N_cap
  EXPECT_EQ(Check(d).call.width, kWidth);
  d.num_rows = 2;
  EXPECT_EQ(Check(d).status, TOPK_CHANNEL_BAD_ROW_PITCH);
  d.row_pitch = (uint64_t{1} << 40) + 1;
  EXPECT_EQ(Check(d).status, TOPK_CHANNEL_BAD_ROW_PITCH);
}

TEST_F(ChannelDescriptor, ExtentsAtTheirEdges) {
  topk_channel_descriptor d = Valid();
  // The indices end exactly at the region's end: accepted; one element more: refused.
  const uint64_t out_bytes = ((kRows - 1) * kK + kK) * sizeof(int32_t);
  d.indices_offset = 65536 - out_bytes;
  EXPECT_EQ(Check(d).status, TOPK_CHANNEL_OK);
  d.indices_offset += 4;
  EXPECT_EQ(Check(d).status, TOPK_CHANNEL_BAD_INDICES);
  d = Valid();
  d.lengths_offset = 65536 - kRows * 4;
  EXPECT_EQ(Check(d).status, TOPK_CHANNEL_OK);
  d.lengths_offset += 4;
  EXPECT_EQ(Check(d).status, TOPK_CHANNEL_BAD_LENGTHS);
}

TEST_F(ChannelDescriptor, OffsetsThatWouldOverflowAreRefused) {
  for (uint64_t offset : {~uint64_t{0} - 3, ~uint64_t{0} - 63, uint64_t{1} << 63}) {
    topk_channel_descriptor d = Valid();
    d.scores_offset = offset;
    EXPECT_EQ(Check(d).status, TOPK_CHANNEL_BAD_SCORES) << offset;
    d = Valid();
    d.indices_offset = offset;
    EXPECT_EQ(Check(d).status, TOPK_CHANNEL_BAD_INDICES) << offset;
  }
  topk_channel_descriptor d = Valid();
  d.out_row_stride = uint64_t{1} << 50;  // (M - 1) * stride would wrap 64 bits with more rows
  EXPECT_EQ(Check(d).status, TOPK_CHANNEL_BAD_ROW_STRIDE);
}

TEST_F(ChannelDescriptor, ValuesFollowTheChannel) {
  topk_channel_descriptor d = Valid();
  d.values_region = 0;
  EXPECT_EQ(Check(d).status, TOPK_CHANNEL_BAD_REGION);  // the channel returns no values
  spec_.return_values = true;
  EXPECT_EQ(Check(Valid()).status, TOPK_CHANNEL_BAD_REGION);  // ...and now they are missing
  d.values_offset = 32768;
  const CheckedCall c = Check(d);
  ASSERT_EQ(c.status, TOPK_CHANNEL_OK);
  EXPECT_EQ(c.call.values, base_ + 32768);
  d.values_offset = 16384 + 8;  // over the indices
  EXPECT_EQ(Check(d).status, TOPK_CHANNEL_OVERLAP);
}

TEST_F(ChannelDescriptor, AnAliasOfTheSameMemoryStillOverlaps) {
  // Two entries naming the same bytes (two registrations of one memory):
  // the output through one overlaps the rows through the other.
  regions_.push_back(regions_.front());
  topk_channel_descriptor d = Valid();
  d.indices_region = 1;
  d.indices_offset = 64;  // inside the rows' span
  EXPECT_EQ(Check(d).status, TOPK_CHANNEL_OVERLAP);
  d.indices_offset = 16384;
  EXPECT_EQ(Check(d).status, TOPK_CHANNEL_OK);
  d.indices_region = 2;  // past the list
  EXPECT_EQ(Check(d).status, TOPK_CHANNEL_BAD_REGION);
}

TEST_F(ChannelDescriptor, ReservedMustBeZero) {
  topk_channel_descriptor d = Valid();
  d.reserved = 1;
  EXPECT_EQ(Check(d).status, TOPK_CHANNEL_BAD_REGION);
}

}  // namespace
}  // namespace topk::server
