// The verifier and the reference are the oracles of every other test, so they
// are tested first: each wrong output below must be rejected.
#include "topk/testing/verifier.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "topk/testing/reference.h"

namespace topk::testing {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// One pitched row owned by the test.
struct OneRow {
  std::vector<float> values;
  int32_t length;
  RowBatch batch() const {
    RowBatch b;
    b.scores = values.data();
    b.pitch = static_cast<int64_t>(values.size());
    b.lengths = &length;
    b.num_rows = 1;
    b.width = static_cast<int64_t>(values.size());
    return b;
  }
};

// values: index 0..5 = 5, 9, 7, 7, 1, 7
OneRow TiedRow() { return {{5, 9, 7, 7, 1, 7}, 6}; }

void ExpectRejected(const OneRow& row, int32_t k, SelectOptions options,
                    std::vector<int32_t> indices, const char* fragment,
                    const RowStatus* status = nullptr) {
  const absl::Status s = VerifySelection(row.batch(), k, options, indices.data(), status);
  EXPECT_FALSE(s.ok()) << "accepted a wrong output (" << fragment << ")";
  EXPECT_NE(s.message().find("row 0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
}

TEST(VerifierTest, AcceptsCorrectSets) {
  const OneRow row = TiedRow();
  EXPECT_TRUE(VerifySelection(row.batch(), 3, {}, std::vector<int32_t>{1, 2, 3}.data()).ok());
  EXPECT_TRUE(VerifySelection(row.batch(), 3, {}, std::vector<int32_t>{5, 1, 3}.data()).ok());
  SelectOptions sorted{.sorted = true};
  EXPECT_TRUE(VerifySelection(row.batch(), 3, sorted, std::vector<int32_t>{1, 2, 3}.data()).ok());
  SelectOptions det{.deterministic = true};
  EXPECT_TRUE(VerifySelection(row.batch(), 3, det, std::vector<int32_t>{1, 2, 3}.data()).ok());
}

TEST(VerifierTest, RejectsDuplicateIndex) {
  ExpectRejected(TiedRow(), 3, {}, {1, 2, 2}, "appears twice");
}

TEST(VerifierTest, RejectsOutOfRangeIndex) {
  OneRow row = TiedRow();
  row.length = 4;  // index 5 is padding now
  ExpectRejected(row, 2, {}, {1, 5}, "outside");
  ExpectRejected(row, 2, {}, {1, -3}, "outside");
}

TEST(VerifierTest, RejectsMissingLargerValue) {
  ExpectRejected(TiedRow(), 3, {}, {1, 2, 0}, "left out but is larger");
}

TEST(VerifierTest, RejectsSentinelInLongRow) {
  ExpectRejected(TiedRow(), 3, {}, {1, 2, -1}, "sentinel");
}

TEST(VerifierTest, ShortRowNeedsAllIndicesThenSentinels) {
  OneRow row = TiedRow();
  row.length = 2;
  EXPECT_TRUE(VerifySelection(row.batch(), 4, {}, std::vector<int32_t>{1, 0, -1, -1}.data()).ok());
  ExpectRejected(row, 4, {}, {0, 1, 2, -1}, "expected the sentinel");
  ExpectRejected(row, 4, {}, {0, 1, -1, 0}, "expected the sentinel");
  ExpectRejected(row, 4, {}, {0, -1, 1, -1}, "outside");
  row.length = 0;
  ExpectRejected(row, 2, {}, {-1, 0}, "expected the sentinel");
}

TEST(VerifierTest, RejectsUnsortedWhenSortedAsked) {
  SelectOptions sorted{.sorted = true};
  ExpectRejected(TiedRow(), 3, sorted, {2, 1, 3}, "out of order");
  ExpectRejected(TiedRow(), 3, sorted, {1, 3, 2}, "out of order");  // tie by index
  OneRow row = TiedRow();
  row.length = 3;
  ExpectRejected(row, 4, sorted, {0, 1, 2, -1}, "out of order");  // short rows too
}

TEST(VerifierTest, RejectsWrongTieChoiceInDeterministicMode) {
  SelectOptions det{.deterministic = true};
  // Top 3 = 9 then two of the three 7s at 2, 3, 5: must be 2 and 3.
  ExpectRejected(TiedRow(), 3, det, {1, 2, 5}, "deterministic tie");
  EXPECT_TRUE(VerifySelection(TiedRow().batch(), 3, {}, std::vector<int32_t>{1, 2, 5}.data()).ok());
  ExpectRejected(TiedRow(), 3, det, {2, 1, 3}, "ascending index order");
}

TEST(VerifierTest, SignedZerosTie) {
  OneRow row{{-0.0f, 0.0f, -1.0f}, 3};
  SelectOptions det{.deterministic = true};
  EXPECT_TRUE(VerifySelection(row.batch(), 1, det, std::vector<int32_t>{0}.data()).ok());
  ExpectRejected(row, 1, det, {1}, "deterministic tie");
}

TEST(VerifierTest, NanRowMustBeReported) {
  OneRow row{{1, kNan, 3, 4}, 4};
  RowStatus ok = RowStatus::kOk;
  ExpectRejected(row, 2, {}, {3, 2}, "row status", &ok);
  RowStatus nan = RowStatus::kNan;
  EXPECT_TRUE(VerifySelection(row.batch(), 2, {}, std::vector<int32_t>{-1, -1}.data(), &nan).ok());
  // NaN beyond L is padding: the row is fine and must not be reported.
  row.length = 1;
  ExpectRejected(row, 2, {}, {0, -1}, "row status", &nan);
  EXPECT_TRUE(VerifySelection(row.batch(), 2, {}, std::vector<int32_t>{0, -1}.data(), &ok).ok());
}

TEST(ReferenceTest, ContractOnTiesZerosInfAndShortRows) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> values = {-inf, 0.0f, -0.0f, inf, 2.0f, 2.0f, kNan, 5.0f};
  std::vector<int32_t> lengths = {6, 3, 0, 8};
  RowBatch b;
  b.scores = values.data();
  b.layout = Layout::kPacked;
  std::vector<int64_t> offsets = {0, 0, 0, 0};
  b.row_offsets = offsets.data();
  b.lengths = lengths.data();
  b.num_rows = 4;
  b.width = 8;
  std::vector<int32_t> out(4 * 4);
  std::vector<RowStatus> status(4);
  SelectOptions sorted{.sorted = true};
  ASSERT_TRUE(ReferenceSelect(b, 4, sorted, {out.data(), status.data()}).ok());
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 4), (std::vector<int32_t>{3, 4, 5, 1}));
  EXPECT_EQ(std::vector<int32_t>(out.begin() + 4, out.begin() + 8),
            (std::vector<int32_t>{1, 2, 0, -1}));
  EXPECT_EQ(std::vector<int32_t>(out.begin() + 8, out.begin() + 12),
            (std::vector<int32_t>{-1, -1, -1, -1}));
  EXPECT_EQ(status[3], RowStatus::kNan);
  EXPECT_EQ(std::vector<int32_t>(out.begin() + 12, out.end()), (std::vector<int32_t>(4, -1)));
  EXPECT_TRUE(VerifySelection(b, 4, sorted, out.data(), status.data()).ok());
  SelectOptions det{.deterministic = true};
  ASSERT_TRUE(ReferenceSelect(b, 4, det, {out.data(), status.data()}).ok());
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 4), (std::vector<int32_t>{1, 3, 4, 5}));
  EXPECT_TRUE(VerifySelection(b, 4, det, out.data(), status.data()).ok());
}

}  // namespace
}  // namespace topk::testing
