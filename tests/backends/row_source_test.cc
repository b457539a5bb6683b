// The one abstraction for where a request's rows are: every source copies any
// byte range exactly, host readers read in place only what is contiguous and
// aligned, and the backends' staging makes one copy of everything else.
#include "server/backends/row_source.h"

#include <cstring>
#include <string>
#include <vector>

#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "server/transport/raw_select.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

// Distinct bytes, so a shifted or short copy cannot pass.
std::string Pattern(size_t bytes) {
  std::string out(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<char>((i * 131 + 7) % 251);
  return out;
}

grpc::ByteBuffer Sliced(const std::string& bytes, size_t piece) {
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i < bytes.size(); i += piece) {
    slices.emplace_back(bytes.data() + i, std::min(piece, bytes.size() - i));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// The range copied with both kinds of stores; they must agree byte for byte.
std::string CopyOut(const RowSource& source, size_t offset, size_t bytes) {
  std::string cached(bytes, '\0');
  source.CopyRange(offset, bytes, reinterpret_cast<std::byte*>(cached.data()), CopyStores::kCached);
  std::string streamed(bytes, '\0');
  source.CopyRange(offset, bytes, reinterpret_cast<std::byte*>(streamed.data()),
                   CopyStores::kStreaming);
  EXPECT_EQ(streamed, cached) << "offset " << offset << " bytes " << bytes;
  return cached;
}

TEST(RowSource, ByteBufferRowsCopyEveryRangeAcrossSliceBoundaries) {
  // The scores start 5 bytes into the message, as after a field header.
  const std::string message = Pattern(4001);
  const int64_t scores_offset = 5;
  const int64_t scores_size = 3992;
  for (size_t piece : {size_t{1}, size_t{3}, size_t{64}, message.size()}) {
    const grpc::ByteBuffer buffer = Sliced(message, piece);
    const ByteBufferRows rows(&buffer, scores_offset, scores_size);
    EXPECT_EQ(rows.size_bytes(), static_cast<size_t>(scores_size));
    EXPECT_EQ(rows.InPlaceHostFloats(), nullptr);  // slices are never read in place
    for (const auto& [offset, bytes] : {std::pair<size_t, size_t>{0, 3992}, {1, 7}, {1000, 2992}}) {
      EXPECT_EQ(CopyOut(rows, offset, bytes), message.substr(scores_offset + offset, bytes))
          << "piece " << piece << " offset " << offset;
    }
  }
}

TEST(CopyBytes, StreamingStoresCopyEveryByteAtAnyAlignmentAndLength) {
  // Lengths around the streaming threshold and the 64-byte body, source and
  // destination at every offset within a line: head, body and tail all
  // exercised, and the bytes around the destination untouched.
  const std::string source = Pattern(70000);
  for (size_t length : {size_t{0}, size_t{1}, size_t{63}, size_t{4095}, size_t{4096}, size_t{4097},
                        size_t{65536 + 13}}) {
    for (size_t src_at : {size_t{0}, size_t{1}, size_t{7}, size_t{16}, size_t{63}}) {
      for (size_t dest_at : {size_t{0}, size_t{3}, size_t{8}, size_t{17}, size_t{64}}) {
        if (src_at + length > source.size()) continue;
        std::string dest(length + 200, '\x5a');
        CopyBytes(reinterpret_cast<std::byte*>(dest.data()) + dest_at,
                  reinterpret_cast<const std::byte*>(source.data()) + src_at, length,
                  CopyStores::kStreaming);
        ASSERT_EQ(dest.substr(dest_at, length), source.substr(src_at, length))
            << "length " << length << " src " << src_at << " dest " << dest_at;
        ASSERT_EQ(dest.substr(0, dest_at), std::string(dest_at, '\x5a'));
        ASSERT_EQ(dest.substr(dest_at + length), std::string(200 - dest_at, '\x5a'));
      }
    }
  }
}

TEST(RowSource, ByteBufferRowsStreamLargeRangesAcrossSlices) {
  // Ranges long enough for the streaming body, crossing 4 KiB + 3 byte slices.
  const std::string message = Pattern(200003);
  const grpc::ByteBuffer buffer = Sliced(message, 4099);
  const ByteBufferRows rows(&buffer, 3, 200000);
  for (const auto& [offset, bytes] :
       {std::pair<size_t, size_t>{0, 200000}, {5, 131072}, {4096, 65539}}) {
    EXPECT_EQ(CopyOut(rows, offset, bytes), message.substr(3 + offset, bytes)) << offset;
  }
}

TEST(RowSource, ContiguousRowsAreReadInPlaceOnlyWhenAligned) {
  std::vector<float> floats = {1.5f, -2.0f, 3.25f, 0.5f};
  const absl::string_view aligned(reinterpret_cast<const char*>(floats.data()),
                                  floats.size() * sizeof(float));
  const ContiguousRows in_place(aligned);
  EXPECT_EQ(in_place.InPlaceHostFloats(), floats.data());
  EXPECT_EQ(CopyOut(in_place, 4, 8), std::string(aligned.substr(4, 8)));

  const std::string storage = "x" + std::string(aligned);
  const ContiguousRows misaligned(absl::string_view(storage).substr(1));
  EXPECT_EQ(misaligned.InPlaceHostFloats(), nullptr);
}

TEST(RowSource, StagingReadsInPlaceWhenAllowedAndCopiesOnceOtherwise) {
  std::vector<float> floats = {4.0f, -1.0f, 2.5f};
  const ContiguousRows rows(absl::string_view(reinterpret_cast<const char*>(floats.data()),
                                              floats.size() * sizeof(float)));
  std::vector<float> staging(floats.size(), 0.0f);
  auto* staging_bytes = reinterpret_cast<std::byte*>(staging.data());
  EXPECT_EQ(StageOnHost(rows, Staging::kInPlaceWhenPossible, staging_bytes), floats.data());
  EXPECT_EQ(staging, std::vector<float>(floats.size(), 0.0f));  // untouched

  const float* copied = StageOnHost(rows, Staging::kAlwaysCopy, staging_bytes);
  EXPECT_EQ(copied, staging.data());
  EXPECT_EQ(staging, floats);

  const std::string message = Pattern(24);
  const grpc::ByteBuffer buffer = Sliced(message, 5);
  const ByteBufferRows scattered(&buffer, 0, 12);
  EXPECT_EQ(StageOnHost(scattered, Staging::kInPlaceWhenPossible, staging_bytes), staging.data());
  EXPECT_EQ(std::memcmp(staging.data(), message.data(), 12), 0);
}

}  // namespace
}  // namespace topk::server::test
