// "No request may write where it reads": a Select by reference whose output
// (indices, values) shares a byte with its scores, lengths or row offsets,
// or with each other, is refused naming both fields and the region, even
// through a second region over the same shared-memory object; layouts that
// come close (outputs in the rows' padding, regions back to back) are
// served exactly.
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "support/regions.h"

namespace topk::server::test {
namespace {

using testing::Distribution;
using testing::LengthPattern;

constexpr int32_t kK = 16;
constexpr int64_t kRows = 4;
constexpr int64_t kWidth = 1000;

class RegionOverlap : public ::testing::TestWithParam<client::CallPath> {
 protected:
  void SetUp() override {
    t_ = StartServer(RegionServerOptions());
    ASSERT_NE(t_.client, nullptr);
    auto session = client::RegionSession::Open(*t_.client, GetParam());
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = *std::move(session);
    // Full rows: every byte of each row is read, so any output byte placed
    // among them is an overlap.
    rows_ = Rows(Distribution::kIndexer, kRows, kWidth, LengthPattern::kFull, 7, kK);
    laid_ = LayOut(rows_, RowLayout::kPitched, kK);
    ASSERT_TRUE(session_->Register("seg", laid_.segment).ok());
  }

  // Pitched rows in "seg", lengths inline or by reference, row starts by
  // pitch or by the offsets LayOut wrote, the output where LayOut put it.
  v1::SelectRequest Valid(bool lengths_ref = false, bool row_offsets = false,
                          bool with_values = false) const {
    client::RegionRowsRef ref;
    ref.scores = {"seg", 0};
    ref.num_rows = static_cast<int32_t>(kRows);
    if (row_offsets) {
      ref.row_offsets = client::RegionSlice{"seg", laid_.offsets_at};
    } else {
      ref.row_pitch = laid_.pitch;
    }
    if (lengths_ref) {
      ref.lengths_ref = client::RegionSlice{"seg", laid_.lengths_at};
      ref.width = static_cast<int32_t>(kWidth);
    } else {
      ref.lengths = rows_.lengths;
    }
    client::RegionOutputRef out{.indices = {"seg", laid_.indices_at}};
    if (with_values) out.values = client::RegionSlice{"seg", laid_.values_at};
    return session_->MakeRequest(kK, ref, &out, {.return_values = with_values});
  }

  // INVALID_ARGUMENT with every one of `parts` in the message; nothing of
  // the segment written (the sentinels are intact); and the valid request
  // still answers exactly afterwards.
  void ExpectRefused(const v1::SelectRequest& request, const std::vector<std::string>& parts) {
    const std::vector<std::byte> before(laid_.segment.data(),
                                        laid_.segment.data() + laid_.segment.size());
    absl::StatusOr<client::SelectResult> result = session_->Select(request);
    ASSERT_FALSE(result.ok()) << parts[0];
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << result.status();
    for (const std::string& part : parts) {
      EXPECT_TRUE(absl::StrContains(result.status().message(), part))
          << "'" << part << "' not in: " << result.status();
    }
    EXPECT_EQ(std::memcmp(before.data(), laid_.segment.data(), before.size()), 0)
        << "a refused request wrote into the segment";
    ExpectExact(Valid(false, false, true));
  }

  void ExpectExact(const v1::SelectRequest& request) {
    absl::StatusOr<client::SelectResult> result = session_->Select(request);
    ASSERT_TRUE(result.ok()) << result.status();
    const bool with_values = request.options().return_values();
    EXPECT_TRUE(tools::Verify(rows_, kK, {}, ReadBack(laid_, kK, with_values)).ok());
  }

  // Byte `element` of row r of the pitched scores.
  uint64_t ScoreByte(int64_t r, int64_t element) const {
    return (r * laid_.pitch + element) * sizeof(float);
  }

  TestServer t_;
  std::unique_ptr<client::RegionSession> session_;
  tools::PackedRows rows_;
  SegmentRows laid_;
};

TEST_P(RegionOverlap, TheValidLayoutIsServed) {
  ExpectExact(Valid());
  ExpectExact(Valid(/*lengths_ref=*/true, /*row_offsets=*/true, /*with_values=*/true));
}

TEST_P(RegionOverlap, IndicesOverTheScoresAreRefused) {
  v1::SelectRequest request = Valid();
  request.mutable_output()->mutable_indices()->set_offset(ScoreByte(2, 500));
  ExpectRefused(request, {"output.indices overlaps region_rows.scores in region 'seg'",
                          "row 0 of output.indices", "row 2 of region_rows.scores"});
  // The last bytes of the last row: output row 0 from one element before
  // row 3's end.
  request = Valid();
  request.mutable_output()->mutable_indices()->set_offset(ScoreByte(3, kWidth - 1));
  ExpectRefused(
      request,
      {"output.indices overlaps region_rows.scores", "row 3 of region_rows.scores",
       absl::StrCat("bytes [", ScoreByte(3, kWidth - 1), ", ", ScoreByte(3, kWidth), ")")});
}

TEST_P(RegionOverlap, ValuesOverTheScoresAreRefused) {
  v1::SelectRequest request = Valid(false, false, true);
  request.mutable_output()->mutable_values()->set_offset(ScoreByte(1, 0));
  ExpectRefused(request, {"output.values overlaps region_rows.scores in region 'seg'",
                          "row 1 of region_rows.scores"});
}

TEST_P(RegionOverlap, OutputsOverTheLengthsAreRefused) {
  // Output row 0 starts 8 bytes before the lengths: it writes lengths[0..1].
  v1::SelectRequest request = Valid(/*lengths_ref=*/true);
  request.mutable_output()->mutable_indices()->set_offset(laid_.lengths_at - 8);
  ExpectRefused(request, {"output.indices overlaps region_rows.lengths_ref in region 'seg'"});
  request = Valid(/*lengths_ref=*/true, false, /*with_values=*/true);
  request.mutable_output()->mutable_values()->set_offset(laid_.lengths_at + 4);
  ExpectRefused(request, {"output.values overlaps region_rows.lengths_ref in region 'seg'"});
}

TEST_P(RegionOverlap, OutputsOverTheRowOffsetsAreRefused) {
  v1::SelectRequest request = Valid(false, /*row_offsets=*/true);
  request.mutable_output()->mutable_indices()->set_offset(laid_.offsets_at + 8);
  ExpectRefused(request, {"output.indices overlaps region_rows.row_offsets in region 'seg'"});
  request = Valid(false, /*row_offsets=*/true, /*with_values=*/true);
  request.mutable_output()->mutable_values()->set_offset(laid_.offsets_at);
  ExpectRefused(request, {"output.values overlaps region_rows.row_offsets in region 'seg'"});
}

TEST_P(RegionOverlap, IndicesOverValuesAreRefused) {
  // Values from the middle of indices row 1: they share its last 8 elements.
  v1::SelectRequest request = Valid(false, false, true);
  request.mutable_output()->mutable_values()->set_offset(laid_.indices_at + (kK + 8) * 4);
  ExpectRefused(request, {"output.indices overlaps output.values in region 'seg'",
                          "row 1 of output.indices", "row 0 of output.values"});
}

// A second region over the same object (at another offset: another mapping)
// is the same memory.
TEST_P(RegionOverlap, AnotherRegionOverTheSameObjectIsTheSameMemory) {
  const uint64_t alias_at = ScoreByte(1, 0) + 4;  // not page aligned
  ASSERT_TRUE(
      session_
          ->RegisterShm("alias", laid_.segment.name(), alias_at, laid_.segment.size() - alias_at)
          .ok());
  v1::SelectRequest request = Valid();
  request.mutable_output()->mutable_indices()->set_region("alias");
  request.mutable_output()->mutable_indices()->set_offset(ScoreByte(2, 10) - alias_at);
  ExpectRefused(request,
                {"output.indices overlaps region_rows.scores in region 'alias' (region 'seg' "
                 "maps the same memory)",
                 "row 2 of region_rows.scores"});
  // Through the alias to where the output belongs: served.
  request.mutable_output()->mutable_indices()->set_offset(laid_.indices_at - alias_at);
  ExpectExact(request);
}

// A segment laid out back to back: row offsets, lengths, rows, indices,
// values, each starting at the byte after the previous one's last. Every
// field is accepted; one element more of any output is refused.
TEST_P(RegionOverlap, BackToBackFieldsAreServedOneElementMoreIsNot) {
  const uint64_t offsets_at = 0;
  const uint64_t lengths_at = offsets_at + kRows * sizeof(int64_t);
  const uint64_t scores_at = lengths_at + kRows * sizeof(int32_t);
  const uint64_t indices_at = scores_at + kRows * kWidth * sizeof(float);
  const uint64_t values_at = indices_at + kRows * kK * sizeof(int32_t);
  const uint64_t end = values_at + kRows * kK * sizeof(float);
  client::SharedMemorySegment tight = MakeSegment("tight", end);
  std::vector<int64_t> starts(kRows);
  for (int64_t r = 0; r < kRows; ++r) starts[r] = r * kWidth;
  std::memcpy(tight.at<int64_t>(offsets_at), starts.data(), kRows * sizeof(int64_t));
  std::memcpy(tight.at<int32_t>(lengths_at), rows_.lengths.data(), kRows * sizeof(int32_t));
  std::memcpy(tight.at<float>(scores_at), rows_.scores.data(), kRows * kWidth * sizeof(float));
  ASSERT_TRUE(session_->Register("tight", tight).ok());

  client::RegionRowsRef ref;
  ref.scores = {"tight", scores_at};
  ref.num_rows = static_cast<int32_t>(kRows);
  ref.row_offsets = client::RegionSlice{"tight", offsets_at};
  ref.lengths_ref = client::RegionSlice{"tight", lengths_at};
  ref.width = static_cast<int32_t>(kWidth);
  client::RegionOutputRef out;
  out.indices = {"tight", indices_at};
  out.values = client::RegionSlice{"tight", values_at};
  absl::StatusOr<client::SelectResult> served =
      session_->Select(kK, ref, &out, {.return_values = true});
  ASSERT_TRUE(served.ok()) << served.status();
  client::SelectResult result{.num_rows = kRows, .k = kK};
  result.indices.assign(tight.at<int32_t>(indices_at), tight.at<int32_t>(indices_at) + kRows * kK);
  result.values.assign(tight.at<float>(values_at), tight.at<float>(values_at) + kRows * kK);
  EXPECT_TRUE(tools::Verify(rows_, kK, {}, result).ok());

  // One element earlier: indices over the last score, values over the last
  // index.
  out.indices.offset = indices_at - 4;
  served = session_->Select(kK, ref, &out, {.return_values = true});
  ASSERT_FALSE(served.ok());
  EXPECT_TRUE(absl::StrContains(served.status().message(),
                                "output.indices overlaps region_rows.scores in region 'tight'"))
      << served.status();
  out.indices.offset = indices_at;
  out.values->offset = values_at - 4;
  served = session_->Select(kK, ref, &out, {.return_values = true});
  ASSERT_FALSE(served.ok());
  EXPECT_TRUE(absl::StrContains(served.status().message(),
                                "output.indices overlaps output.values in region 'tight'"))
      << served.status();
}

// The output in each row's padding: every row reads [r * pitch, r * pitch +
// L_r) and writes [r * pitch + width, r * pitch + width + K). The rows'
// hull covers every output, so only a row-by-row comparison tells them
// apart; rows given in reverse address order (row_offsets) take the sort.
TEST_P(RegionOverlap, OutputsInTheRowsPaddingAreServedALongerRowIsNot) {
  const int64_t pitch = kWidth + kK;
  for (const bool reversed : {false, true}) {
    SCOPED_TRACE(reversed ? "rows in reverse order" : "rows in order");
    const uint64_t offsets_at = kRows * pitch * sizeof(float);
    client::SharedMemorySegment mixed = MakeSegment("mixed", offsets_at + kRows * sizeof(int64_t));
    std::vector<int64_t> starts(kRows);
    float* scores = mixed.at<float>(0);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int64_t i = 0; i < kRows * pitch; ++i) scores[i] = nan;
    for (int64_t r = 0; r < kRows; ++r) {
      starts[r] = (reversed ? kRows - 1 - r : r) * pitch;
      std::memcpy(scores + starts[r], rows_.scores.data() + rows_.offsets[r],
                  kWidth * sizeof(float));
    }
    std::memcpy(mixed.at<int64_t>(offsets_at), starts.data(), kRows * sizeof(int64_t));
    const std::string name = reversed ? "mixed-reversed" : "mixed";
    ASSERT_TRUE(session_->Register(name, mixed).ok());

    client::RegionRowsRef ref;
    ref.scores = {name, 0};
    ref.num_rows = static_cast<int32_t>(kRows);
    if (reversed) {
      ref.row_offsets = client::RegionSlice{name, offsets_at};
    } else {
      ref.row_pitch = pitch;
    }
    ref.lengths = rows_.lengths;
    const client::RegionOutputRef out{.indices = {name, kWidth * sizeof(float)},
                                      .row_stride = pitch};
    absl::StatusOr<client::SelectResult> served = session_->Select(kK, ref, &out);
    ASSERT_TRUE(served.ok()) << served.status();
    client::SelectResult result{.num_rows = kRows, .k = kK};
    for (int64_t r = 0; r < kRows; ++r) {
      const int32_t* row = mixed.at<int32_t>((r * pitch + kWidth) * sizeof(int32_t));
      result.indices.insert(result.indices.end(), row, row + kK);
    }
    EXPECT_TRUE(tools::Verify(rows_, kK, {}, result).ok());

    // Row 0 one element longer reads the first slot after it: output row 0
    // in order, output row 3 when row 0 sits last.
    ref.lengths[0] = kWidth + 1;
    served = session_->Select(kK, ref, &out);
    ASSERT_FALSE(served.ok());
    EXPECT_EQ(served.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string expected = absl::StrCat(
        "output.indices overlaps region_rows.scores in region '", name, "': row ",
        reversed ? kRows - 1 : 0, " of output.indices and row 0 of region_rows.scores");
    EXPECT_TRUE(absl::StrContains(served.status().message(), expected)) << served.status();
  }
}

INSTANTIATE_TEST_SUITE_P(BothCallPaths, RegionOverlap,
                         ::testing::Values(client::CallPath::kStream, client::CallPath::kUnary),
                         [](const ::testing::TestParamInfo<client::CallPath>& info) {
                           return info.param == client::CallPath::kStream ? "Pipeline" : "Unary";
                         });

}  // namespace
}  // namespace topk::server::test
