// Messages that are not what they claim: an unparseable stream chunk, a
// non-UTF-8 request_id, a request_id that changes mid-stream, garbage bodies
// to the small RPCs. Each must be refused with INVALID_ARGUMENT naming the
// problem, never answered OK from part of the stream.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "support/raw_calls.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

using testing::Distribution;

constexpr char kSelectStream[] = "/topk.v1.TopK/SelectStream";
constexpr char kNotAMessage[] = "\xff\xff\xff\xff";  // a tag whose varint never ends

// `rows` as SelectStream chunks of about `chunk_rows` rows each, serialized.
std::vector<std::string> Chunks(const tools::PackedRows& rows, int32_t k, int chunk_rows,
                                const std::string& request_id = "") {
  std::vector<std::string> chunks;
  const int64_t num_rows = static_cast<int64_t>(rows.lengths.size());
  for (int64_t first = 0; first < num_rows; first += chunk_rows) {
    const int64_t last = std::min<int64_t>(num_rows, first + chunk_rows);
    v1::SelectChunk chunk;
    if (first == 0) {
      chunk.set_k(k);
      chunk.set_request_id(request_id);
    }
    for (int64_t r = first; r < last; ++r) chunk.add_lengths(rows.lengths[r]);
    const int64_t begin = rows.offsets[first];
    const int64_t end = last < num_rows ? rows.offsets[last] : rows.scores.size();
    chunk.set_scores(reinterpret_cast<const char*>(rows.scores.data() + begin),
                     (end - begin) * sizeof(float));
    chunks.push_back(chunk.SerializeAsString());
  }
  return chunks;
}

// A SelectChunk's request_id field (5, length-delimited) holding `bytes`
// as they are, which protobuf's writer would not produce for invalid UTF-8.
std::string RequestIdField(const std::string& bytes) {
  return std::string(1, static_cast<char>((5 << 3) | 2)) +
         std::string(1, static_cast<char>(bytes.size())) + bytes;
}

void ExpectInvalid(const grpc::Status& status, std::initializer_list<const char*> words) {
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << status.error_code() << ": " << status.error_message();
  for (const char* word : words) {
    EXPECT_TRUE(absl::StrContains(status.error_message(), word))
        << "'" << word << "' missing from: " << status.error_message();
  }
}

class MalformedMessages : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options = SmallOptions();
    options.enable_echo = true;
    t_ = StartServer(options);
    ASSERT_NE(t_.client, nullptr);
  }
  TestServer t_;
  tools::PackedRows rows_ = Rows(Distribution::kIndexer, 6, 800);
};

TEST_F(MalformedMessages, WholeStreamIsAnsweredExactly) {
  // The control: the same chunks, untouched, are one exact answer.
  const RawReply reply =
      RawClientStream(t_.client->channel(), kSelectStream, Chunks(rows_, 16, 2, "ok-1"));
  ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
  v1::SelectResponse response;
  ASSERT_TRUE(response.ParseFromString(reply.response));
  EXPECT_EQ(response.num_rows(), 6);
  EXPECT_EQ(response.request_id(), "ok-1");
  absl::StatusOr<client::SelectResult> result = client::DecodeResponse(response);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(tools::Verify(rows_, 16, {}, *result).ok());
}

TEST_F(MalformedMessages, UnparseableLaterChunkFailsTheStream) {
  std::vector<std::string> chunks = Chunks(rows_, 16, 2);
  chunks[1] = kNotAMessage;
  ExpectInvalid(RawClientStream(t_.client->channel(), kSelectStream, chunks).status,
                {"chunk 1", "SelectChunk"});
}

TEST_F(MalformedMessages, NonUtf8RequestIdInALaterChunkFailsTheStream) {
  std::vector<std::string> chunks = Chunks(rows_, 16, 2);
  chunks[2] += RequestIdField("\xc3\x28");
  ExpectInvalid(RawClientStream(t_.client->channel(), kSelectStream, chunks).status,
                {"chunk 2", "UTF-8"});
}

TEST_F(MalformedMessages, NonUtf8RequestIdInTheFirstChunkIsNamed) {
  std::vector<std::string> chunks = Chunks(rows_, 16, 2);
  chunks[0] += RequestIdField("\xff");
  const grpc::Status status = RawClientStream(t_.client->channel(), kSelectStream, chunks).status;
  ExpectInvalid(status, {"chunk 0", "UTF-8"});
  EXPECT_FALSE(absl::StrContains(status.error_message(), "k = 0")) << status.error_message();
}

TEST_F(MalformedMessages, ADifferentRequestIdInALaterChunkFailsTheStream) {
  std::vector<std::string> chunks = Chunks(rows_, 16, 2, "first");
  v1::SelectChunk other;
  other.set_request_id("second");
  chunks[1] += other.SerializeAsString();  // concatenation merges the fields
  ExpectInvalid(RawClientStream(t_.client->channel(), kSelectStream, chunks).status,
                {"chunk 1", "request_id"});
  // Repeating the same id is allowed.
  std::vector<std::string> same = Chunks(rows_, 16, 2, "first");
  v1::SelectChunk repeat;
  repeat.set_request_id("first");
  same[1] += repeat.SerializeAsString();
  EXPECT_TRUE(RawClientStream(t_.client->channel(), kSelectStream, same).status.ok());
}

// The unary Select path decodes the wire bytes itself: the same rules as
// protobuf's parser, end to end.
TEST_F(MalformedMessages, UnarySelectChecksUtf8AndLengthPrefixes) {
  const std::string wire = client::Client::MakeRequest(16, rows_.view(), {}).SerializeAsString();
  constexpr char kSelect[] = "/topk.v1.TopK/Select";
  ExpectInvalid(RawUnary(t_.client->channel(), kSelect, wire + RequestIdField("\xc3\x28")).status,
                {"request_id", "UTF-8"});
  // inline_rows (field 3) claiming more bytes than follow.
  ExpectInvalid(RawUnary(t_.client->channel(), kSelect, wire + "\x1a\x7f\x0a").status, {});
  // packed lengths (field 2 inside inline_rows) claiming 8 bytes, 2 there.
  const std::string rows_field = std::string("\x12\x08\x01\x01", 4);
  ExpectInvalid(
      RawUnary(t_.client->channel(), kSelect,
               std::string("\x08\x04\x1a", 3) + static_cast<char>(rows_field.size()) + rows_field)
          .status,
      {});
  // The same bytes, well formed, are answered exactly.
  const RawReply ok = RawUnary(t_.client->channel(), kSelect, wire);
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  v1::SelectResponse response;
  ASSERT_TRUE(response.ParseFromString(ok.response));
  absl::StatusOr<client::SelectResult> result = client::DecodeResponse(response);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(tools::Verify(rows_, 16, {}, *result).ok());
}

TEST_F(MalformedMessages, GarbageBodiesToTheSmallRpcsAreInvalidArgument) {
  for (const char* method :
       {"/topk.v1.TopK/GetServerInfo", "/topk.v1.TopK/GetStats", "/topk.v1.TopK/Echo"}) {
    SCOPED_TRACE(method);
    ExpectInvalid(RawUnary(t_.client->channel(), method, kNotAMessage).status, {"not a valid"});
  }
  // The same RPCs still answer well-formed requests.
  EXPECT_TRUE(RawUnary(t_.client->channel(), "/topk.v1.TopK/GetStats", "").status.ok());
  const RawReply info = RawUnary(t_.client->channel(), "/topk.v1.TopK/GetServerInfo", "");
  ASSERT_TRUE(info.status.ok());
  v1::ServerInfo parsed;
  ASSERT_TRUE(parsed.ParseFromString(info.response));
  EXPECT_EQ(parsed.limits().max_rows(), 64);
}

}  // namespace
}  // namespace topk::server::test
