#include "gathered_select.h"

#include <chrono>
#include <future>
#include <string>
#include <utility>
#include <vector>

#include "grpc_status.h"  // client/src
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace topk::client::c_api {
namespace {

// topk.v1 field numbers (proto/topk/v1/topk.proto) and protobuf wire types.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kDelimited = 2;
constexpr uint32_t kRequestK = 1, kRequestOptions = 2, kRequestInlineRows = 3,
                   kRequestRequestId = 5;
constexpr uint32_t kOptionsSorted = 1, kOptionsDeterministic = 2, kOptionsReturnValues = 3;
constexpr uint32_t kRowsScores = 1, kRowsLengths = 2, kRowsDtype = 3;

size_t VarintSize(uint64_t value) {
  size_t size = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++size;
  }
  return size;
}

// int32 fields go as their sign-extended 64-bit value, as protobuf does.
uint64_t Int32Wire(int32_t value) { return static_cast<uint64_t>(static_cast<int64_t>(value)); }

class Encoder {
 public:
  void Varint(uint64_t value) {
    while (value >= 0x80) {
      bytes_.push_back(static_cast<char>(value | 0x80));
      value >>= 7;
    }
    bytes_.push_back(static_cast<char>(value));
  }
  void Tag(uint32_t field, uint32_t wire_type) { Varint((field << 3) | wire_type); }
  void Bool(uint32_t field, bool value) {
    if (!value) return;  // proto3: defaults are not sent
    Tag(field, kVarint);
    Varint(1);
  }
  void Bytes(const char* data, size_t size) { bytes_.append(data, size); }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

}  // namespace

grpc::ByteBuffer EncodeGathered(int32_t k, const GatheredRows& rows, const CallOptions& options,
                                std::string& head, std::string& tail) {
  size_t score_bytes = 0;
  size_t packed_lengths = 0;
  for (const int32_t length : rows.lengths) {
    score_bytes += static_cast<size_t>(length) * rows.element_bytes;
    packed_lengths += VarintSize(Int32Wire(length));
  }
  Encoder inner_tail;
  if (!rows.lengths.empty()) {
    inner_tail.Tag(kRowsLengths, kDelimited);
    inner_tail.Varint(packed_lengths);
    for (const int32_t length : rows.lengths) inner_tail.Varint(Int32Wire(length));
  }
  if (rows.dtype != v1::SCORE_TYPE_FP32) {
    inner_tail.Tag(kRowsDtype, kVarint);
    inner_tail.Varint(static_cast<uint64_t>(rows.dtype));
  }
  const size_t inline_rows_bytes =
      1 + VarintSize(score_bytes) + score_bytes + inner_tail.bytes().size();

  Encoder encoder;
  if (k != 0) {
    encoder.Tag(kRequestK, kVarint);
    encoder.Varint(Int32Wire(k));
  }
  Encoder option_bits;
  option_bits.Bool(kOptionsSorted, options.sorted);
  option_bits.Bool(kOptionsDeterministic, options.deterministic);
  option_bits.Bool(kOptionsReturnValues, options.return_values);
  if (!option_bits.bytes().empty()) {
    encoder.Tag(kRequestOptions, kDelimited);
    encoder.Varint(option_bits.bytes().size());
    encoder.Bytes(option_bits.bytes().data(), option_bits.bytes().size());
  }
  encoder.Tag(kRequestInlineRows, kDelimited);
  encoder.Varint(inline_rows_bytes);
  encoder.Tag(kRowsScores, kDelimited);
  encoder.Varint(score_bytes);
  head = std::move(encoder.bytes());

  tail = std::move(inner_tail.bytes());
  if (!options.request_id.empty()) {
    Encoder id;
    id.Tag(kRequestRequestId, kDelimited);
    id.Varint(options.request_id.size());
    id.Bytes(options.request_id.data(), options.request_id.size());
    tail += id.bytes();
  }

  std::vector<grpc::Slice> slices;
  slices.reserve(rows.rows.size() + 2);
  // Static slices: gRPC reads them in place and frees nothing; head, tail
  // and the rows outlive the call, which SelectGathered waits for.
  slices.emplace_back(head.data(), head.size(), grpc::Slice::STATIC_SLICE);
  for (size_t r = 0; r < rows.rows.size(); ++r) {
    const size_t bytes = static_cast<size_t>(rows.lengths[r]) * rows.element_bytes;
    if (bytes > 0) slices.emplace_back(rows.rows[r], bytes, grpc::Slice::STATIC_SLICE);
  }
  if (!tail.empty()) slices.emplace_back(tail.data(), tail.size(), grpc::Slice::STATIC_SLICE);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

absl::StatusOr<SelectResult> SelectGathered(grpc::GenericStub& stub, int32_t k,
                                            const GatheredRows& rows, const CallOptions& options) {
  std::string head;
  std::string tail;
  const grpc::ByteBuffer request = EncodeGathered(k, rows, options, head, tail);
  grpc::ClientContext context;
  if (options.timeout != absl::InfiniteDuration()) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + options.timeout));
  }
  context.set_wait_for_ready(!options.fail_fast);
  grpc::ByteBuffer reply;
  std::promise<grpc::Status> finished;
  std::future<grpc::Status> outcome = finished.get_future();
  const auto start = std::chrono::steady_clock::now();
  stub.UnaryCall(&context, "/topk.v1.TopK/Select", grpc::StubOptions(), &request, &reply,
                 [&finished](grpc::Status result) { finished.set_value(std::move(result)); });
  const grpc::Status status = outcome.get();
  const int64_t elapsed_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::steady_clock::now() - start)
                                 .count();
  if (!status.ok()) return ToAbsl(status);
  v1::SelectResponse response;
  grpc::ProtoBufferReader reader(&reply);
  if (!response.ParseFromZeroCopyStream(&reader)) {
    return absl::DataLossError("response: not a SelectResponse");
  }
  absl::StatusOr<SelectResult> result = DecodeResponse(response);
  if (result.ok()) result->client_us = elapsed_us;
  return result;
}

}  // namespace topk::client::c_api
