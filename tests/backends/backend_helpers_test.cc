// The helpers every backend shares (server/backends/backend.h): the one row
// limit and its message, the NaN written at unanswered value slots, the
// gather of values by index (typed, row offsets honoured, rows that failed
// get no values), and the staging of a batch's parts at their offsets.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/backends/backend.h"

namespace topk::server::test {
namespace {

TEST(BackendHelpers, CheckRowCountNamesTheFieldAndTheLimit) {
  const RequestLimits limits{.max_rows = 4};
  EXPECT_TRUE(CheckRowCount(4, limits).ok());
  const absl::Status over = CheckRowCount(5, limits);
  EXPECT_EQ(over.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(over.message(), "lengths: 5 rows exceed max_rows = 4");
}

TEST(BackendHelpers, QuietNanBitsPerType) {
  EXPECT_EQ(QuietNanBits(ScoreType::kFloat32), 0x7fc00000u);
  EXPECT_EQ(QuietNanBits(ScoreType::kBFloat16), 0x7fc0u);
  EXPECT_EQ(QuietNanBits(ScoreType::kFloat16), 0x7e00u);
  float f;
  const uint32_t bits = QuietNanBits(ScoreType::kFloat32);
  std::memcpy(&f, &bits, sizeof(f));
  EXPECT_TRUE(std::isnan(f));
}

// Two rows at offsets 4 and 0 of one element space: values come from each
// row's own start; -1 slots and a row whose status is not OK get NaN.
TEST(BackendHelpers, GatherValuesReadsEachRowAtItsOffset) {
  const float scores[] = {10, 11, 12, 13, 20, 21, 22, 23};
  const int64_t offsets[] = {4, 0, 0};
  const int32_t lengths[] = {4, 4, 4};
  const RowPart part{.num_rows = 3};
  const SelectRows rows{.parts = {&part, 1},
                        .lengths = lengths,
                        .row_offsets = offsets,
                        .num_rows = 3,
                        .total_elements = 8};
  const int32_t indices[] = {3, -1, 0, 2, 1, 1};
  RowStatus status[] = {RowStatus::kOk, RowStatus::kOk, RowStatus::kNan};
  float values[6] = {};
  GatherValues(scores, rows, 2,
               {.indices = const_cast<int32_t*>(indices), .values = values, .row_status = status});
  EXPECT_EQ(values[0], 23);
  EXPECT_TRUE(std::isnan(values[1]));
  EXPECT_EQ(values[2], 10);
  EXPECT_EQ(values[3], 12);
  EXPECT_TRUE(std::isnan(values[4]));  // the row failed: its indices are no answer
  EXPECT_TRUE(std::isnan(values[5]));
}

// 16-bit types travel as their bit patterns, unchanged, NaN in their own type.
TEST(BackendHelpers, GatherValuesKeepsSixteenBitPatterns) {
  const uint16_t scores[] = {0x3f80, 0x4000, 0xc040};
  const int64_t offsets[] = {0};
  const int32_t lengths[] = {3};
  const RowPart part{.num_rows = 1};
  for (ScoreType dtype : {ScoreType::kBFloat16, ScoreType::kFloat16}) {
    const SelectRows rows{.parts = {&part, 1},
                          .lengths = lengths,
                          .row_offsets = offsets,
                          .num_rows = 1,
                          .total_elements = 3,
                          .dtype = dtype};
    int32_t indices[] = {2, 0, -1};
    RowStatus status[] = {RowStatus::kOk};
    uint16_t values[3] = {};
    GatherValues(scores, rows, 3, {.indices = indices, .values = values, .row_status = status});
    EXPECT_EQ(values[0], 0xc040);
    EXPECT_EQ(values[1], 0x3f80);
    EXPECT_EQ(values[2], static_cast<uint16_t>(QuietNanBits(dtype)));
  }
}

// Several parts are copied back to back at their element offsets (each
// rounded up to whole floats); a lone aligned part is read in place.
TEST(BackendHelpers, StagePartsCopiesEveryPartAtItsOffset) {
  const std::vector<float> a = {1, 2, 3};
  const std::vector<float> b = {4, 5};
  ContiguousRows source_a(
      absl::string_view(reinterpret_cast<const char*>(a.data()), a.size() * sizeof(float)));
  ContiguousRows source_b(
      absl::string_view(reinterpret_cast<const char*>(b.data()), b.size() * sizeof(float)));
  const RowPart parts[] = {
      {.source = &source_a, .num_rows = 1, .element_offset = 0},
      {.source = &source_b, .first_row = 1, .num_rows = 1, .element_offset = 3}};
  std::vector<float> staging(8, -1);
  const SelectRows batch{.parts = parts, .num_rows = 2, .total_elements = 5};
  const float* staged = StageParts(batch, Staging::kInPlaceWhenPossible,
                                   reinterpret_cast<std::byte*>(staging.data()));
  EXPECT_EQ(staged, staging.data());
  EXPECT_EQ(std::vector<float>(staging.begin(), staging.begin() + 6),
            (std::vector<float>{1, 2, 3, 4, 5, -1}));

  const SelectRows lone{.parts = {parts, 1}, .num_rows = 1, .total_elements = 3};
  EXPECT_EQ(
      StageParts(lone, Staging::kInPlaceWhenPossible, reinterpret_cast<std::byte*>(staging.data())),
      a.data());  // in place: no copy
  std::vector<float> copy(4, -1);
  EXPECT_EQ(StageParts(lone, Staging::kAlwaysCopy, reinterpret_cast<std::byte*>(copy.data())),
            copy.data());
  EXPECT_EQ(copy, (std::vector<float>{1, 2, 3, -1}));
}

}  // namespace
}  // namespace topk::server::test
