// BF16 / FP16 rows end to end (issue 13): inline, streamed and in a shared
// memory region, each answer checked by the exactness verifier, values
// returned bit for bit in the input type, and every malformed request of
// each type refused with the status and message the proto promises.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "support/regions.h"
#include "support/test_server.h"
#include "topk/client/regions.h"

namespace topk::server::test {
namespace {

using testing::Distribution;
using testing::LengthPattern;

constexpr ScoreType kHalfTypes[] = {ScoreType::kBFloat16, ScoreType::kFloat16};

tools::PackedRows TypedRows(ScoreType dtype, Distribution d, int64_t m, int64_t width,
                            LengthPattern lengths, uint64_t seed, int32_t k) {
  return tools::Generate({.distribution = d,
                          .lengths = lengths,
                          .rows = m,
                          .width = width,
                          .k = k,
                          .seed = seed,
                          .dtype = dtype});
}

// Every returned value is the row's element at its index, bit for bit, in
// the input type; the type's quiet NaN at -1.
void ExpectValuesInInputType(const tools::PackedRows& rows, int32_t k,
                             const client::SelectResult& result) {
  ASSERT_EQ(result.values_dtype, tools::ToWire(rows.dtype));
  const uint16_t nan = static_cast<uint16_t>(QuietNanBits(rows.dtype));
  ASSERT_TRUE(result.values.empty());
  ASSERT_EQ(result.values16.size(), result.indices.size());
  for (size_t r = 0; r < rows.lengths.size(); ++r) {
    for (int j = 0; j < k; ++j) {
      const int32_t i = result.indices[r * k + j];
      const uint16_t v = result.values16[r * k + j];
      EXPECT_EQ(v, i < 0 ? nan : rows.scores16[rows.offsets[r] + i]) << r << "," << j;
    }
  }
}

class HalfE2e : public ::testing::TestWithParam<ScoreType> {};

TEST_P(HalfE2e, SelectIsExactIncludingHeavyTies) {
  const ScoreType dtype = GetParam();
  TestServer t = StartServer();
  ASSERT_NE(t.client, nullptr);
  struct Case {
    Distribution d;
    LengthPattern lengths;
    int32_t k;
    bool sorted, deterministic;
  };
  const Case cases[] = {
      {Distribution::kIndexer, LengthPattern::kRandom, 64, false, false},
      {Distribution::kBf16Ties, LengthPattern::kRandom, 100, false, true},
      {Distribution::kBf16Ties, LengthPattern::kFull, 500, true, true},
      {Distribution::kFp8Ties, LengthPattern::kEdges, 33, true, false},
      {Distribution::kInfMix, LengthPattern::kRandom, 7, true, false},
      {Distribution::kSignedZeros, LengthPattern::kEdges, 16, false, true},
      {Distribution::kSubnormals, LengthPattern::kRandom, 50, false, false},
      {Distribution::kConstant, LengthPattern::kFull, 1, false, true},
  };
  uint64_t seed = 11;
  for (const Case& c : cases) {
    const tools::PackedRows rows = TypedRows(dtype, c.d, 13, 20000, c.lengths, seed++, c.k);
    ASSERT_EQ(rows.bytes(), static_cast<int64_t>(rows.scores16.size() * 2));
    const client::CallOptions options{
        .sorted = c.sorted, .deterministic = c.deterministic, .return_values = true};
    absl::StatusOr<client::SelectResult> result = t.client->Select(c.k, rows.view(), options);
    ASSERT_TRUE(result.ok()) << testing::DistributionName(c.d) << ": " << result.status();
    EXPECT_TRUE(
        tools::Verify(rows, c.k, {.sorted = c.sorted, .deterministic = c.deterministic}, *result)
            .ok())
        << testing::DistributionName(c.d);
    ExpectValuesInInputType(rows, c.k, *result);
  }
}

// Chunks of 1001 bytes: boundaries fall inside elements and inside rows.
TEST_P(HalfE2e, StreamedChunksSplitElementsAndRows) {
  const ScoreType dtype = GetParam();
  TestServer t = StartServer();
  const tools::PackedRows rows =
      TypedRows(dtype, Distribution::kBf16Ties, 7, 3000, LengthPattern::kEdges, 4, 48);
  absl::StatusOr<client::SelectResult> result = t.client->SelectStreaming(
      48, rows.view(), {.sorted = true, .deterministic = true, .return_values = true}, 1001);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(tools::Verify(rows, 48, {.sorted = true, .deterministic = true}, *result).ok());
  ExpectValuesInInputType(rows, 48, *result);
}

// The payload and the metrics count real bytes: 2 per element.
TEST_P(HalfE2e, InlineBytesAreHalfOfFp32AndCountedAsSent) {
  const ScoreType dtype = GetParam();
  TestServer t = StartServer();
  const tools::PackedRows half =
      TypedRows(dtype, Distribution::kIndexer, 8, 4096, LengthPattern::kRandom, 5, 64);
  const tools::PackedRows full = TypedRows(ScoreType::kFloat32, Distribution::kIndexer, 8, 4096,
                                           LengthPattern::kRandom, 5, 64);
  ASSERT_EQ(half.lengths, full.lengths);
  EXPECT_EQ(half.bytes() * 2, full.bytes());
  EXPECT_EQ(client::Client::MakeRequest(64, half.view(), {}).inline_rows().scores().size(),
            static_cast<size_t>(half.bytes()));
  absl::StatusOr<client::SelectResult> result =
      t.client->Select(64, half.view(), {.return_values = true});
  ASSERT_TRUE(result.ok()) << result.status();
  absl::StatusOr<v1::Stats> stats = t.client->GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->bytes_in(), static_cast<uint64_t>(half.bytes()));
  EXPECT_EQ(stats->bytes_out(), 8u * 64 * (4 + 2));  // int32 indices + 16-bit values
}

INSTANTIATE_TEST_SUITE_P(Types, HalfE2e, ::testing::ValuesIn(kHalfTypes),
                         [](const auto& info) { return std::string(ScoreTypeName(info.param)); });

TEST(HalfPrecision, ServerInfoListsEveryTypeOnTheCpu) {
  TestServer t = StartServer();
  absl::StatusOr<v1::ServerInfo> info = t.client->GetServerInfo();
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->dtypes_size(), 3);
  EXPECT_EQ(info->dtypes(0), v1::SCORE_TYPE_FP32);
  EXPECT_EQ(info->dtypes(1), v1::SCORE_TYPE_BF16);
  EXPECT_EQ(info->dtypes(2), v1::SCORE_TYPE_FP16);
}

// A request of `dtype` over lengths {3, 5} carrying `bytes` score bytes.
v1::SelectRequest Request(v1::ScoreType dtype, size_t bytes) {
  v1::SelectRequest request;
  request.set_k(2);
  v1::InlineRows* rows = request.mutable_inline_rows();
  rows->add_lengths(3);
  rows->add_lengths(5);
  rows->set_dtype(dtype);
  std::string scores(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) scores[i] = static_cast<char>(0x3c + i % 3);  // not zeros
  rows->set_scores(scores);
  return request;
}

TEST(HalfPrecision, WrongByteCountsAreRefusedPerType) {
  TestServer t = StartServer();
  struct Case {
    v1::ScoreType dtype;
    size_t bytes;
    std::string message;
  };
  const Case cases[] = {
      {v1::SCORE_TYPE_BF16, 15,
       "scores: 15 bytes, expected 2 * sum(lengths) = 16 for 2 rows of bf16"},
      {v1::SCORE_TYPE_BF16, 17,
       "scores: 17 bytes, expected 2 * sum(lengths) = 16 for 2 rows of bf16"},
      {v1::SCORE_TYPE_BF16, 32,
       "scores: 32 bytes, expected 2 * sum(lengths) = 16 for 2 rows of bf16"},
      {v1::SCORE_TYPE_FP16, 31,
       "scores: 31 bytes, expected 2 * sum(lengths) = 16 for 2 rows of fp16"},
      {v1::SCORE_TYPE_FP16, 0,
       "scores: 0 bytes, expected 2 * sum(lengths) = 16 for 2 rows of fp16"},
      {v1::SCORE_TYPE_FP32, 16, "scores: 16 bytes, expected 4 * sum(lengths) = 32 for 2 rows"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<client::SelectResult> result = t.client->Select(Request(c.dtype, c.bytes));
    ASSERT_FALSE(result.ok()) << c.message;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(result.status().message(), c.message);
  }
  // The right counts pass: 16 bytes of 16-bit rows, 32 of FP32.
  for (auto [dtype, bytes] :
       {std::pair{v1::SCORE_TYPE_BF16, 16}, {v1::SCORE_TYPE_FP16, 16}, {v1::SCORE_TYPE_FP32, 32}}) {
    absl::StatusOr<client::SelectResult> ok = t.client->Select(Request(dtype, bytes));
    EXPECT_TRUE(ok.ok()) << ok.status();
  }
}

TEST(HalfPrecision, UnknownDtypeIsRefusedNamingTheField) {
  TestServer t = StartServer();
  for (int value : {3, 7, -1}) {
    absl::StatusOr<client::SelectResult> result =
        t.client->Select(Request(static_cast<v1::ScoreType>(value), 16));
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(result.status().message(),
              absl::StrCat("inline_rows.dtype = ", value,
                           " is not a ScoreType (SCORE_TYPE_FP32 = 0, SCORE_TYPE_BF16 = 1, "
                           "SCORE_TYPE_FP16 = 2)"));
  }
  // The same in a stream's first chunk.
  const std::vector<uint16_t> scores(8, 0x3f80);
  const std::vector<int32_t> lengths = {3, 5};
  absl::StatusOr<client::SelectResult> streamed = t.client->SelectStreaming(
      2, client::HalfRows(static_cast<v1::ScoreType>(9), scores, lengths), {}, 5);
  ASSERT_FALSE(streamed.ok());
  EXPECT_EQ(streamed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(streamed.status().message(),
            "chunk 0: dtype = 9 is not a ScoreType (SCORE_TYPE_FP32 = 0, SCORE_TYPE_BF16 = 1, "
            "SCORE_TYPE_FP16 = 2)");
}

// Streams: a later chunk may repeat the type, not change it; the total byte
// count is checked in the stream's type.
TEST(HalfPrecision, StreamChunksKeepTheFirstChunksType) {
  TestServer t = StartServer();
  std::unique_ptr<v1::TopK::Stub> stub = v1::TopK::NewStub(t.client->channel());
  auto run = [&](std::vector<v1::SelectChunk> chunks) {
    grpc::ClientContext context;
    v1::SelectResponse response;
    auto writer = stub->SelectStream(&context, &response);
    for (const v1::SelectChunk& chunk : chunks) {
      if (!writer->Write(chunk)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  };
  v1::SelectChunk first;
  first.set_k(2);
  first.set_dtype(v1::SCORE_TYPE_BF16);
  first.add_lengths(3);
  first.set_scores(std::string(7, '\x3f'));  // ends inside an element
  v1::SelectChunk second;
  second.add_lengths(5);
  second.set_scores(std::string(9, '\x3f'));
  second.set_dtype(v1::SCORE_TYPE_BF16);  // equal: fine
  grpc::Status ok = run({first, second});
  EXPECT_TRUE(ok.ok()) << ok.error_message();

  second.set_dtype(v1::SCORE_TYPE_FP16);
  grpc::Status changed = run({first, second});
  EXPECT_EQ(changed.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(changed.error_message(),
            "chunk 1: dtype = 2 differs from the first chunk's 1 (bf16; leave it unset or equal)");

  second.clear_dtype();
  second.set_scores(std::string(10, '\x3f'));  // 17 bytes for 8 BF16 elements
  grpc::Status short_by_one = run({first, second});
  EXPECT_EQ(short_by_one.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(short_by_one.error_message(),
            "scores: 17 bytes, expected 2 * sum(lengths) = 16 for 2 rows of bf16");
}

// 16-bit rows in a region, at every 2-byte offset a 4-byte row cannot take.
TEST(HalfPrecision, RegionRowsAlignToTheirElementSize) {
  TestServer t = StartServer(RegionServerOptions());
  absl::StatusOr<std::unique_ptr<client::RegionSession>> session =
      client::RegionSession::Open(*t.client);
  ASSERT_TRUE(session.ok()) << session.status();
  const int32_t k = 40;
  for (ScoreType dtype : kHalfTypes) {
    const tools::PackedRows rows =
        TypedRows(dtype, Distribution::kBf16Ties, 5, 700, LengthPattern::kEdges, 9, k);
    const int64_t m = static_cast<int64_t>(rows.lengths.size());
    const int64_t pitch = rows.width + 1;  // odd: rows start at 2-byte, not 4-byte, steps
    const uint64_t scores_at = 2;          // 2-byte aligned only
    const uint64_t values_at = AlignUp(scores_at + m * pitch * 2, 64) + 2;
    const uint64_t indices_at = AlignUp(values_at + m * k * 2, 64);
    client::SharedMemorySegment segment = MakeSegment("half", indices_at + m * k * 4);
    auto* base = segment.at<std::byte>(0);
    std::memset(base, 0xff, indices_at);  // NaN in every byte a request must not read
    for (int64_t r = 0; r < m; ++r) {
      std::memcpy(base + scores_at + r * pitch * 2, rows.scores16.data() + rows.offsets[r],
                  rows.lengths[r] * 2);
    }
    const std::string name = absl::StrCat("seg-", std::string(ScoreTypeName(dtype)));
    ASSERT_TRUE((*session)->Register(name, segment).ok());
    client::RegionRowsRef ref;
    ref.scores = {name, scores_at};
    ref.num_rows = static_cast<int32_t>(m);
    ref.row_pitch = pitch;
    ref.lengths = rows.lengths;
    ref.dtype = tools::ToWire(dtype);
    const client::RegionOutputRef out{.indices = {name, indices_at}, .values = {{name, values_at}}};
    absl::StatusOr<client::SelectResult> reply =
        (*session)->Select(k, ref, &out, {.sorted = true, .return_values = true});
    ASSERT_TRUE(reply.ok()) << reply.status();
    client::SelectResult answer{.num_rows = m, .k = k};
    answer.indices.assign(segment.at<int32_t>(indices_at), segment.at<int32_t>(indices_at) + m * k);
    EXPECT_TRUE(tools::Verify(rows, k, {.sorted = true}, answer).ok()) << ScoreTypeName(dtype);
    answer.values_dtype = tools::ToWire(dtype);
    answer.values16.resize(m * k);
    std::memcpy(answer.values16.data(), base + values_at, m * k * 2);
    ExpectValuesInInputType(rows, k, answer);

    // Odd offsets: refused, naming the field and the element size.
    client::RegionRowsRef odd = ref;
    odd.scores.offset = 3;
    absl::StatusOr<client::SelectResult> refused = (*session)->Select(k, odd, &out, {});
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(refused.status().message(), "region_rows.scores.offset: 3 is not 2-byte aligned");
    client::RegionOutputRef odd_values = out;
    odd_values.values = client::RegionSlice{name, values_at + 1};
    refused = (*session)->Select(k, ref, &odd_values, {.return_values = true});
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().message(),
              absl::StrCat("output.values.offset: ", values_at + 1, " is not 2-byte aligned"));
    // The same rows read as FP32 need 4-byte alignment.
    client::RegionRowsRef as_fp32 = ref;
    as_fp32.dtype = v1::SCORE_TYPE_FP32;
    refused = (*session)->Select(k, as_fp32, &out, {});
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().message(), "region_rows.scores.offset: 2 is not 4-byte aligned");
    // An unknown type, named.
    client::RegionRowsRef unknown = ref;
    unknown.dtype = static_cast<v1::ScoreType>(4);
    refused = (*session)->Select(k, unknown, &out, {});
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(refused.status().message(),
              "region_rows.dtype = 4 is not a ScoreType (SCORE_TYPE_FP32 = 0, SCORE_TYPE_BF16 = "
              "1, SCORE_TYPE_FP16 = 2)");
  }
}

}  // namespace
}  // namespace topk::server::test
