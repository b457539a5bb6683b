// Differential fuzzing of the raw Select decoder against protobuf's own
// parser: every byte string the decoder accepts must be a SelectRequest that
// protobuf accepts too, with the same fields, and every string protobuf
// refuses the decoder must refuse. The corpus starts from valid requests and
// mutates them the ways a broken or hostile client would (bit flips, cuts,
// inserted bytes, spliced messages, edited length prefixes), delivered in
// receive buffers cut into random slices. Bounded in iterations and time so
// it runs in every CI build; TOPK_FUZZ_SECONDS runs it longer.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "server/transport/raw_select.h"
#include "topk/v1/topk.pb.h"

namespace topk::server {
namespace {

using Bytes = std::string;

grpc::ByteBuffer Sliced(const Bytes& bytes, std::mt19937_64& rng) {
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  while (at < bytes.size()) {
    const size_t piece = std::min<size_t>(bytes.size() - at, 1 + rng() % 64);
    slices.emplace_back(bytes.data() + at, piece);
    at += piece;
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

Bytes ValidRequest(std::mt19937_64& rng) {
  v1::SelectRequest request;
  request.set_k(1 + static_cast<int32_t>(rng() % 300));
  request.mutable_options()->set_sorted(rng() % 2);
  request.mutable_options()->set_deterministic(rng() % 2);
  request.mutable_options()->set_return_values(rng() % 2);
  if (rng() % 2) request.set_request_id("req-" + std::to_string(rng() % 1000));
  v1::InlineRows& rows = *request.mutable_inline_rows();
  const int num_rows = static_cast<int>(rng() % 6);
  std::uniform_real_distribution<float> score(-3.0f, 3.0f);
  std::string scores;
  for (int r = 0; r < num_rows; ++r) {
    const int32_t length = static_cast<int32_t>(rng() % 40);
    rows.add_lengths(length);
    for (int32_t i = 0; i < length; ++i) {
      const float value = score(rng);
      scores.append(reinterpret_cast<const char*>(&value), sizeof(value));
    }
  }
  rows.set_scores(scores);
  // Every ScoreType and one number the enum does not define (decoded as
  // sent; refused later, by validation).
  if (rng() % 2) rows.set_dtype(static_cast<v1::ScoreType>(rng() % 4));
  return request.SerializeAsString();
}

// One mutation of `bytes`, chosen at random.
void Mutate(Bytes& bytes, const std::vector<Bytes>& corpus, std::mt19937_64& rng) {
  const size_t n = bytes.size();
  switch (rng() % 7) {
    case 0:  // flip a bit
      if (n > 0) bytes[rng() % n] ^= static_cast<char>(1u << (rng() % 8));
      break;
    case 1:  // cut the tail
      if (n > 0) bytes.resize(rng() % n);
      break;
    case 2:  // insert random bytes
      for (int i = 0, count = 1 + static_cast<int>(rng() % 4); i < count; ++i) {
        bytes.insert(bytes.begin() + (n == 0 ? 0 : rng() % (n + 1)), static_cast<char>(rng()));
      }
      break;
    case 3:  // overwrite a byte with a varint-ish value (length prefixes, tags)
      if (n > 0) {
        static constexpr unsigned char kInteresting[] = {0x00, 0x01, 0x7f, 0x80, 0xff,
                                                         0x0a, 0x12, 0x1a, 0x2a, 0x10};
        bytes[rng() % n] = static_cast<char>(kInteresting[rng() % sizeof(kInteresting)]);
      }
      break;
    case 4:  // splice another message's tail onto a cut of this one
      if (!corpus.empty()) {
        const Bytes& other = corpus[rng() % corpus.size()];
        bytes.resize(n == 0 ? 0 : rng() % (n + 1));
        bytes += other.substr(other.empty() ? 0 : rng() % other.size());
      }
      break;
    case 5:  // append a whole second message (protobuf merges them)
      if (!corpus.empty()) bytes += corpus[rng() % corpus.size()];
      break;
    case 6:  // delete a range
      if (n > 1) {
        const size_t from = rng() % n;
        bytes.erase(from, 1 + rng() % std::min<size_t>(8, n - from));
      }
      break;
  }
}

// The decoder's view of a request must equal protobuf's.
void ExpectSameRequest(const RawSelectRequest& raw, const grpc::ByteBuffer& buffer,
                       const v1::SelectRequest& parsed, const Bytes& bytes) {
  const std::string hex = absl::BytesToHexString(bytes.substr(0, 4096));
  ASSERT_EQ(raw.k, parsed.k()) << hex;
  ASSERT_EQ(raw.options.SerializeAsString(), parsed.options().SerializeAsString()) << hex;
  ASSERT_EQ(raw.request_id, parsed.request_id()) << hex;
  ASSERT_EQ(raw.has_inline_rows, parsed.has_inline_rows()) << hex;
  ASSERT_EQ(raw.dtype, parsed.inline_rows().dtype()) << hex;
  const auto& lengths = parsed.inline_rows().lengths();
  ASSERT_EQ(raw.num_lengths, lengths.size()) << hex;
  ASSERT_TRUE(std::equal(raw.lengths.begin(), raw.lengths.end(), lengths.begin())) << hex;
  const std::string& scores = parsed.inline_rows().scores();
  ASSERT_EQ(raw.scores_size, static_cast<int64_t>(scores.size())) << hex;
  std::string copied(scores.size(), '\0');
  ByteBufferRows(&buffer, raw.scores_offset, raw.scores_size)
      .CopyRange(0, scores.size(), reinterpret_cast<std::byte*>(copied.data()),
                 CopyStores::kCached);
  ASSERT_EQ(copied, scores) << hex;
}

// The two ways the decoder once parted from protobuf, found by the loop below.
TEST(RawSelectFuzz, RefusesALengthPrefixPastItsEnclosingField) {
  // k = 5; inline_rows of 4 bytes holding packed lengths that claim 9 bytes.
  const Bytes wire("\x08\x05\x1a\x04\x12\x09\x01\x02", 8);
  ASSERT_FALSE(v1::SelectRequest().ParseFromString(wire));
  std::mt19937_64 rng(1);
  RawSelectRequest raw;
  EXPECT_FALSE(ParseRawSelect(Sliced(wire, rng), 100, raw).ok());
  // inline_rows itself claiming more bytes than the message has.
  const Bytes cut("\x08\x05\x1a\x09\x12\x01\x01", 7);
  ASSERT_FALSE(v1::SelectRequest().ParseFromString(cut));
  RawSelectRequest raw_cut;
  EXPECT_FALSE(ParseRawSelect(Sliced(cut, rng), 100, raw_cut).ok());
}

// A tag of more than 5 bytes (here an unknown field, wire type 2, as an
// 8-byte varint): CodedInputStream reads it truncated, protobuf refuses it.
TEST(RawSelectFuzz, RefusesATagLongerThanFiveBytes) {
  for (const Bytes& wire : {Bytes("\xd2\x9f\xbf\xb0\xcf\xcf\xbf\x30\x01\x00", 10),
                            Bytes("\x08\x05\x1a\x09\x8a\x80\x80\x80\x80\x80\x00\x01\x00",
                                  13)}) {  // the same inside inline_rows
    ASSERT_FALSE(v1::SelectRequest().ParseFromString(wire));
    std::mt19937_64 rng(1);
    RawSelectRequest raw;
    const absl::Status status = ParseRawSelect(Sliced(wire, rng), 100, raw);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("a tag over 5 bytes"), absl::string_view::npos) << status;
  }
}

TEST(RawSelectFuzz, RefusesARequestIdThatIsNotUtf8) {
  const Bytes wire("\x08\x05\x2a\x02\xc3\x28", 6);  // request_id = C3 28
  ASSERT_FALSE(v1::SelectRequest().ParseFromString(wire));
  std::mt19937_64 rng(1);
  RawSelectRequest raw;
  const absl::Status status = ParseRawSelect(Sliced(wire, rng), 100, raw);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("request_id"), absl::string_view::npos) << status;
}

TEST(RawSelectFuzz, AgreesWithProtobufOnMutatedRequests) {
  const char* env = std::getenv("TOPK_FUZZ_SECONDS");
  const double seconds = env != nullptr ? std::atof(env) : 10.0;
  const int64_t max_iterations = env != nullptr ? INT64_MAX : 400000;
  std::mt19937_64 rng(20261130);
  std::vector<Bytes> corpus;
  for (int i = 0; i < 64; ++i) corpus.push_back(ValidRequest(rng));

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int64_t iterations = 0, accepted = 0, refused = 0;
  for (; iterations < max_iterations && std::chrono::steady_clock::now() < deadline; ++iterations) {
    Bytes bytes = corpus[rng() % corpus.size()];
    for (int m = 0, count = 1 + static_cast<int>(rng() % 3); m < count; ++m) {
      Mutate(bytes, corpus, rng);
    }
    v1::SelectRequest parsed;
    const bool protobuf_ok = parsed.ParseFromString(bytes);
    const grpc::ByteBuffer buffer = Sliced(bytes, rng);
    RawSelectRequest raw;
    // A row limit above anything the corpus holds: every length is kept.
    const absl::Status raw_status = ParseRawSelect(buffer, 1 << 20, raw);
    const bool raw_ok = raw_status.ok();
    ASSERT_EQ(raw_ok, protobuf_ok) << raw_status << "; decoder " << (raw_ok ? "accepts" : "refuses")
                                   << " what protobuf " << (protobuf_ok ? "accepts" : "refuses")
                                   << ": " << absl::BytesToHexString(bytes.substr(0, 4096));
    if (raw_ok) {
      ExpectSameRequest(raw, buffer, parsed, bytes);
      if (corpus.size() < 4096) corpus.push_back(bytes);  // keep what parses: deeper mutations
      ++accepted;
    } else {
      ++refused;
    }
  }
  // Both outcomes must have been exercised, or the fuzzer tested nothing.
  EXPECT_GT(accepted, 100);
  EXPECT_GT(refused, 100);
  std::printf("raw Select fuzz: %lld inputs, %lld accepted, %lld refused\n",
              static_cast<long long>(iterations), static_cast<long long>(accepted),
              static_cast<long long>(refused));
}

}  // namespace
}  // namespace topk::server
