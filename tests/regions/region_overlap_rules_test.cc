// CheckNoOverlap (server/regions/region_overlap.h) as a pure function: a
// field that writes may share no byte with any other field in the same
// memory (through one region or two that map it), readers may share, and
// the refusal names both fields, the region(s), the rows and the shared
// bytes in the writer's region's offsets. Row-exact: rows that interleave
// without touching pass, whatever order their starts come in.
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "server/regions/region_overlap.h"

namespace topk::server::test {
namespace {

constexpr MemoryPlace kSegment{.object = {7, 42}, .start = 1000};
constexpr MemoryPlace kOtherSegment{.object = {7, 43}, .start = 1000};

// Two pitched FP32 rows of 10 elements in region 'r': bytes [0, 80).
TouchedBytes Scores() {
  return {.field = "scores",
          .region = "r",
          .place = kSegment,
          .element_bytes = 4,
          .rows = 2,
          .stride = 10,
          .length = 10};
}

TouchedBytes Indices(uint64_t offset, int64_t rows = 1, int64_t stride = 4) {
  return {.field = "output.indices",
          .region = "r",
          .place = kSegment,
          .offset = offset,
          .element_bytes = 4,
          .rows = rows,
          .stride = stride,
          .length = 4,
          .writes = true};
}

TEST(RegionOverlapRules, AnOutputBesideTheRowsPasses) {
  const TouchedBytes fields[] = {Scores(), Indices(80)};
  EXPECT_TRUE(CheckNoOverlap(fields).ok());
}

TEST(RegionOverlapRules, AnOutputOverTheLastRowIsRefusedNamingTheRowAndBytes) {
  const TouchedBytes fields[] = {Scores(), Indices(76)};
  const absl::Status status = CheckNoOverlap(fields);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "output.indices overlaps scores in region 'r': output.indices and row 1 of scores "
            "share bytes [76, 80) of the region (no request may write where it reads or writes "
            "another field)");
}

TEST(RegionOverlapRules, ReadersMayShareBytes) {
  TouchedBytes lengths = Scores();
  lengths.field = "lengths";
  const TouchedBytes fields[] = {Scores(), lengths};
  EXPECT_TRUE(CheckNoOverlap(fields).ok());
}

TEST(RegionOverlapRules, TwoWritersMayNotShareBytes) {
  TouchedBytes values = Indices(100);
  values.field = "output.values";
  const TouchedBytes fields[] = {Indices(96), values};
  const absl::Status status = CheckNoOverlap(fields);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("output.indices overlaps output.values"), absl::string_view::npos)
      << status;
}

TEST(RegionOverlapRules, OtherMemoryNeverOverlaps) {
  TouchedBytes out = Indices(0);
  out.place = kOtherSegment;
  const TouchedBytes fields[] = {Scores(), out};
  EXPECT_TRUE(CheckNoOverlap(fields).ok());
}

// Two regions over one object: offsets differ, bytes are the same.
TEST(RegionOverlapRules, AnAliasOfTheSameMemoryIsNamed) {
  TouchedBytes in = Scores();
  in.region = "in";
  in.rows = 1;
  in.offset = 1008;  // object bytes [2008, 2048)
  TouchedBytes out = Indices(0);
  out.field = "output.values";
  out.region = "out";
  out.place = {.object = {7, 42}, .start = 2000};  // object bytes [2000, 2016)
  const TouchedBytes fields[] = {in, out};
  const absl::Status status = CheckNoOverlap(fields);
  EXPECT_EQ(status.message(),
            "output.values overlaps scores in region 'out' (region 'in' maps the same memory): "
            "output.values and scores share bytes [8, 16) of the region (no request may write "
            "where it reads or writes another field)");
}

// Outputs in the rows' padding: the hulls meet, no row does.
TEST(RegionOverlapRules, OutputsInterleavedWithRowsPassRowByRow) {
  TouchedBytes scores = Scores();
  scores.length = 6;  // rows [0, 24) and [40, 64): padding [24, 40) and [64, 80)
  const TouchedBytes fields[] = {scores, Indices(24, 2, 10)};  // [24, 40), [64, 80)
  EXPECT_TRUE(CheckNoOverlap(fields).ok());
  const TouchedBytes shifted[] = {scores, Indices(20, 2, 10)};
  const absl::Status status = CheckNoOverlap(shifted);
  EXPECT_NE(
      status.message().find("row 0 of output.indices and row 0 of scores share bytes [20, 24)"),
      absl::string_view::npos)
      << status;
}

// Rows by offset in reverse address order (as packed rows may be).
TEST(RegionOverlapRules, RowsOutOfAddressOrderAreStillCheckedExactly) {
  const std::vector<int64_t> starts = {30, 0, 15};  // [120, 160), [0, 40), [60, 100)
  TouchedBytes scores = Scores();
  scores.rows = 3;
  scores.starts = starts;
  const TouchedBytes gap[] = {scores, Indices(44)};  // [44, 60): between rows
  EXPECT_TRUE(CheckNoOverlap(gap).ok());
  const TouchedBytes hit[] = {scores, Indices(100, 1)};  // [100, 116)
  EXPECT_TRUE(CheckNoOverlap(hit).ok());
  const TouchedBytes into[] = {scores, Indices(110)};  // [110, 126): into row 0
  const absl::Status status = CheckNoOverlap(into);
  EXPECT_NE(status.message().find("row 0 of scores share bytes [120, 126)"),
            absl::string_view::npos)
      << status;
}

TEST(RegionOverlapRules, EmptyRowsTouchNothing) {
  const std::vector<int32_t> lengths = {10, 0};
  TouchedBytes scores = Scores();
  scores.lengths = lengths;  // row 1 [40, 80) is empty
  const TouchedBytes fields[] = {scores, Indices(40, 2, 4)};
  EXPECT_TRUE(CheckNoOverlap(fields).ok());
}

}  // namespace
}  // namespace topk::server::test
