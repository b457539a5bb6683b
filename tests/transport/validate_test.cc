// The transport's request checks (server/transport/validate.h) as pure
// functions: every refusal is INVALID_ARGUMENT and its message names the
// field, the row and the limit, so a client can fix the request from the
// message alone. The server suites (bad_input_test) show the same statuses
// reach the wire.
#include "server/transport/validate.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace topk::server::test {
namespace {

constexpr RequestLimits kLimits{
    .max_k = 16, .max_rows = 4, .max_width = 100, .max_batch_bytes = 1024};

void ExpectInvalid(const absl::Status& status, const std::vector<std::string>& parts) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  for (const std::string& part : parts) {
    EXPECT_TRUE(absl::StrContains(status.message(), part))
        << "'" << status.message() << "' does not name '" << part << "'";
  }
}

TEST(Validate, AcceptsAWellFormedBatchAndReportsTheLongestRow) {
  const RequestLimits limits{.max_k = 16, .max_rows = 4, .max_width = 100};
  const int32_t lengths[] = {3, 0, 100};
  absl::StatusOr<int32_t> longest = ValidateSelect(16, 3, lengths, 4 * 103, limits);
  ASSERT_TRUE(longest.ok()) << longest.status();
  EXPECT_EQ(*longest, 100);
  const absl::Status too_big =
      ValidateSelect(16, 3, lengths, 4 * 103,
                     {.max_k = 16, .max_rows = 4, .max_width = 100, .max_batch_bytes = 400})
          .status();
  EXPECT_TRUE(absl::StrContains(too_big.message(), "max_batch_bytes")) << too_big;
}

TEST(Validate, KOutsideOneToMaxKNamesTheRange) {
  EXPECT_TRUE(CheckK(1, kLimits).ok());
  EXPECT_TRUE(CheckK(16, kLimits).ok());
  ExpectInvalid(CheckK(0, kLimits), {"k = 0", "[1, 16]", "max_k"});
  ExpectInvalid(CheckK(17, kLimits), {"k = 17", "[1, 16]"});
  const int32_t lengths[] = {4};
  ExpectInvalid(ValidateSelect(17, 1, lengths, 16, kLimits).status(), {"k = 17"});
}

TEST(Validate, ABadLengthNamesItsRow) {
  const int32_t negative[] = {4, 4, -1, 4};
  ExpectInvalid(ValidateSelect(2, 4, negative, 44, kLimits).status(),
                {"lengths[2] = -1", "negative", "(row 2)"});
  const int32_t wide[] = {4, 101};
  ExpectInvalid(ValidateSelect(2, 2, wide, 420, kLimits).status(),
                {"lengths[1] = 101", "max_width = 100", "(row 1)"});
}

TEST(Validate, RowCountsOutsideTheLimitsAreRefused) {
  ExpectInvalid(ValidateSelect(2, 0, {}, 0, kLimits).status(), {"lengths", "empty", "0 rows"});
  const int32_t five[] = {1, 1, 1, 1, 1};
  ExpectInvalid(ValidateSelect(2, 5, five, 20, kLimits).status(),
                {"lengths: 5 rows", "max_rows = 4"});
}

// A decoder that stopped storing lengths past the row limit never reaches
// here with fewer lengths than rows: if it did, that is the server's bug.
TEST(Validate, FewerDecodedLengthsThanRowsIsInternal) {
  const int32_t lengths[] = {1, 1};
  EXPECT_EQ(ValidateSelect(2, 3, lengths, 12, kLimits).status().code(),
            absl::StatusCode::kInternal);
}

TEST(Validate, ScoreBytesMustMatchTheLengthsInTheRowsType) {
  const int32_t lengths[] = {3, 5};
  EXPECT_TRUE(ValidateSelect(2, 2, lengths, 32, kLimits).ok());
  ExpectInvalid(ValidateSelect(2, 2, lengths, 31, kLimits).status(),
                {"scores: 31 bytes", "expected 4 * sum(lengths) = 32", "for 2 rows"});
  // BF16: two bytes an element, and the message names the type.
  EXPECT_TRUE(ValidateSelect(2, 2, lengths, 16, kLimits, ScoreType::kBFloat16).ok());
  ExpectInvalid(ValidateSelect(2, 2, lengths, 32, kLimits, ScoreType::kBFloat16).status(),
                {"expected 2 * sum(lengths) = 16", "bf16"});
}

TEST(Validate, TheByteLimitCountsTheRowsType) {
  const int32_t lengths[] = {100, 100, 100};  // 300 elements
  ExpectInvalid(ValidateSelect(2, 3, lengths, 1200, kLimits).status(),
                {"4 * sum(lengths) = 1200", "max_batch_bytes = 1024"});
  // The same rows in FP16 take 600 bytes: within the limit.
  EXPECT_TRUE(ValidateSelect(2, 3, lengths, 600, kLimits, ScoreType::kFloat16).ok());
}

TEST(Validate, ReceivedStreamBytesAgainstTheLimit) {
  EXPECT_TRUE(CheckReceivedScoreBytes(1024, kLimits).ok());
  ExpectInvalid(CheckReceivedScoreBytes(1025, kLimits),
                {"scores: 1025 bytes", "max_batch_bytes = 1024"});
}

TEST(Validate, InlineRowsCheckTheirTypeFirst) {
  const std::string bytes(8, '\0');
  ContiguousRows rows(bytes);
  const int32_t lengths[] = {4};
  absl::StatusOr<InlineRows> bf16 = CheckInlineRows(2, 1, 1, lengths, rows, kLimits);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_EQ(bf16->dtype, ScoreType::kBFloat16);
  EXPECT_EQ(bf16->max_length, 4);
  EXPECT_EQ(bf16->rows, &rows);
  ExpectInvalid(CheckInlineRows(2, 9, 1, lengths, rows, kLimits).status(),
                {"inline_rows.dtype = 9", "is not a ScoreType"});
  // FP32 (wire 0) reads the same 8 bytes as two elements, not four.
  ExpectInvalid(CheckInlineRows(2, 0, 1, lengths, rows, kLimits).status(),
                {"scores: 8 bytes", "expected 4 * sum(lengths) = 16"});
}

}  // namespace
}  // namespace topk::server::test
