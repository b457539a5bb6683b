// The raw Select decoder against protobuf's own encoder, over receive buffers
// cut into slices of every awkward size, plus malformed input.
#include "server/transport/raw_select.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

// `bytes` as a gRPC buffer of slices of `piece` bytes (the last one shorter).
grpc::ByteBuffer Sliced(const std::string& bytes, size_t piece) {
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i < bytes.size(); i += piece) {
    slices.emplace_back(bytes.data() + i, std::min(piece, bytes.size() - i));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

TEST(RawSelect, MatchesProtobufAcrossSliceSizes) {
  const tools::PackedRows rows = Rows(testing::Distribution::kIndexer, 7, 3000);
  v1::SelectRequest request = client::Client::MakeRequest(
      99, rows.view(), {.sorted = true, .return_values = true, .request_id = "req-7"});
  const std::string wire = request.SerializeAsString();
  const std::string& scores = request.inline_rows().scores();
  for (size_t piece : {size_t{1}, size_t{3}, size_t{7}, size_t{4096}, wire.size()}) {
    const grpc::ByteBuffer buffer = Sliced(wire, piece);
    RawSelectRequest raw;
    ASSERT_TRUE(ParseRawSelect(buffer, 1000, raw).ok()) << piece;
    EXPECT_EQ(raw.k, 99);
    EXPECT_TRUE(raw.options.sorted());
    EXPECT_FALSE(raw.options.deterministic());
    EXPECT_TRUE(raw.options.return_values());
    EXPECT_TRUE(raw.has_inline_rows);
    EXPECT_EQ(raw.lengths, rows.lengths);
    EXPECT_EQ(raw.num_lengths, 7);
    EXPECT_EQ(raw.request_id, "req-7");
    ASSERT_EQ(raw.scores_size, static_cast<int64_t>(scores.size()));
    std::string copied(scores.size(), '\0');
    ByteBufferRows(&buffer, raw.scores_offset, raw.scores_size)
        .CopyRange(0, scores.size(), reinterpret_cast<std::byte*>(copied.data()),
                   CopyStores::kCached);
    EXPECT_EQ(copied, scores) << piece;
  }
}

TEST(RawSelect, AcceptsUnpackedLengthsAndSkipsUnknownFields) {
  // k = 5 (field 1), unknown field 15 = 1, inline_rows (field 3) with
  // scores (field 1, 8 bytes) and two unpacked lengths (field 2): 1 and 1.
  const float values[2] = {1.5f, -2.0f};
  std::string inner = "\x0a\x08";
  inner.append(reinterpret_cast<const char*>(values), sizeof(values));
  inner += std::string("\x10\x01\x10\x01", 4);
  std::string wire = std::string("\x08\x05\x78\x01\x1a", 5);
  wire += static_cast<char>(inner.size());
  wire += inner;
  RawSelectRequest raw;
  ASSERT_TRUE(ParseRawSelect(Sliced(wire, 2), 1000, raw).ok());
  EXPECT_EQ(raw.k, 5);
  EXPECT_EQ(raw.lengths, (std::vector<int32_t>{1, 1}));
  EXPECT_EQ(raw.scores_size, 8);
}

TEST(RawSelect, KeepsOnlyOneLengthMoreThanTheRowLimit) {
  const tools::PackedRows rows = Rows(testing::Distribution::kIndexer, 50, 10);
  const std::string wire = client::Client::MakeRequest(4, rows.view(), {}).SerializeAsString();
  RawSelectRequest raw;
  ASSERT_TRUE(ParseRawSelect(Sliced(wire, 64), 8, raw).ok());
  EXPECT_EQ(raw.lengths.size(), 9u);
  EXPECT_EQ(raw.num_lengths, 50);
}

TEST(RawSelect, MalformedBytesAreInvalidArgument) {
  const tools::PackedRows rows = Rows(testing::Distribution::kIndexer, 3, 100);
  const std::string wire = client::Client::MakeRequest(4, rows.view(), {}).SerializeAsString();
  for (const std::string& bad :
       {wire.substr(0, wire.size() / 2), std::string("\xff\xff\xff\xff\xff\xff", 6),
        std::string("\x1a\x7f\x0a", 3)}) {
    RawSelectRequest raw;
    const absl::Status status = ParseRawSelect(Sliced(bad, 5), 1000, raw);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "not a valid topk.v1.SelectRequest"));
  }
}

}  // namespace
}  // namespace topk::server::test
