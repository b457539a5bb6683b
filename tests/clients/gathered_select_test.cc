// The native core's hand-encoded inline SelectRequest (gathered_select.h)
// parses, with protobuf itself, to the request Client::MakeRequest builds:
// every option, score type, request id, empty and zero-length rows, and
// lengths whose varints take one to five bytes.
#include "c_api/gathered_select.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "topk/client/client.h"

namespace topk::client::c_api {
namespace {

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

void ExpectSameRequest(int32_t k, const std::vector<std::vector<uint16_t>>& rows16,
                       const std::vector<std::vector<float>>& rows32, v1::ScoreType dtype,
                       const CallOptions& options) {
  const bool wide = dtype == v1::SCORE_TYPE_FP32;
  std::vector<const void*> starts;
  std::vector<int32_t> lengths;
  std::vector<float> packed32;
  std::vector<uint16_t> packed16;
  const size_t n = wide ? rows32.size() : rows16.size();
  for (size_t r = 0; r < n; ++r) {
    if (wide) {
      starts.push_back(rows32[r].data());
      lengths.push_back(static_cast<int32_t>(rows32[r].size()));
      packed32.insert(packed32.end(), rows32[r].begin(), rows32[r].end());
    } else {
      starts.push_back(rows16[r].data());
      lengths.push_back(static_cast<int32_t>(rows16[r].size()));
      packed16.insert(packed16.end(), rows16[r].begin(), rows16[r].end());
    }
  }
  const GatheredRows gathered{.rows = starts,
                              .lengths = lengths,
                              .element_bytes = wide ? sizeof(float) : sizeof(uint16_t),
                              .dtype = dtype};
  std::string head, tail;
  v1::SelectRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(EncodeGathered(k, gathered, options, head, tail))));
  const Rows rows =
      wide ? Rows{.scores = packed32, .lengths = lengths} : HalfRows(dtype, packed16, lengths);
  v1::SelectRequest expected = Client::MakeRequest(k, rows, options);
  // MakeRequest always sets options; the encoder sends them only when one is on.
  if (!options.sorted && !options.deterministic && !options.return_values) {
    expected.clear_options();
  }
  EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString())
      << parsed.DebugString() << "\nexpected:\n"
      << expected.DebugString();
}

TEST(GatheredSelect, EncodesWhatMakeRequestBuilds) {
  std::vector<std::vector<float>> rows32 = {{1, 2, 3}, {}, std::vector<float>(200, 0.5f), {7}};
  for (const bool sorted : {false, true}) {
    for (const bool values : {false, true}) {
      CallOptions options{.sorted = sorted, .deterministic = !sorted, .return_values = values};
      ExpectSameRequest(2048, {}, rows32, v1::SCORE_TYPE_FP32, options);
      options.request_id = "req-42";
      ExpectSameRequest(1, {}, rows32, v1::SCORE_TYPE_FP32, options);
    }
  }
  const std::vector<std::vector<uint16_t>> rows16 = {{0x3c00, 0x4000}, {}, {0x7bff}};
  ExpectSameRequest(8, rows16, {}, v1::SCORE_TYPE_BF16, {});
  ExpectSameRequest(8, rows16, {}, v1::SCORE_TYPE_FP16, {.return_values = true});
}

TEST(GatheredSelect, EncodesEdgeValues) {
  ExpectSameRequest(4, {}, {}, v1::SCORE_TYPE_FP32, {});      // no rows
  ExpectSameRequest(0, {}, {{1}}, v1::SCORE_TYPE_FP32, {});   // k = 0: the server's to refuse
  ExpectSameRequest(-3, {}, {{1}}, v1::SCORE_TYPE_FP32, {});  // negative: 10-byte varint
  // Lengths whose varints take 1, 2 and 3 bytes.
  ExpectSameRequest(16, {},
                    {std::vector<float>(127), std::vector<float>(128), std::vector<float>(20000)},
                    v1::SCORE_TYPE_FP32, {});
}

}  // namespace
}  // namespace topk::client::c_api
