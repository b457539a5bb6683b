// Select's request read straight from gRPC's receive buffer. Protobuf's
// generated parser would first copy the (tens of MB of) score bytes into a
// std::string; here the small fields are decoded with protobuf's own
// CodedInputStream and the scores are only located: ByteBufferRows hands them
// to the backend, which copies them once, into the memory it reads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/backends/row_source.h"
#include "topk/v1/topk.pb.h"

namespace topk::server {

// A SelectRequest with its score bytes left in the buffer.
struct RawSelectRequest {
  int32_t k = 0;
  v1::SelectOptions options;
  bool has_inline_rows = false;
  std::vector<int32_t> lengths;  // the first max_rows + 1 of them
  int64_t num_lengths = 0;       // how many the message holds
  int64_t scores_offset = 0;     // where the score bytes start in the message
  int64_t scores_size = 0;
  // inline_rows.dtype as sent (a topk.v1.ScoreType number, possibly one the
  // enum does not define: see score_dtype.h).
  int32_t dtype = 0;
  std::string request_id;
  // The message names regions (region_rows, output, session_id or
  // ordering). Such a message carries no large score payload of its own
  // (its rows are elsewhere), so it is then also decoded in full by
  // protobuf, into `by_reference`, which the region path reads; and a
  // message protobuf refuses is refused here too.
  bool references_regions = false;
  v1::SelectRequest by_reference;
};

// Decodes `buffer` (a serialized topk.v1.SelectRequest). INVALID_ARGUMENT
// for bytes that are not one. Keeps at most max_rows + 1 lengths.
absl::Status ParseRawSelect(const grpc::ByteBuffer& buffer, size_t max_rows, RawSelectRequest& out);

// The score bytes of a parsed request where gRPC received them (a chain of
// slices), copied out on demand. `buffer` must outlive it (gRPC keeps the
// request until the call finishes). The slices are listed once, here: the
// CUDA backend copies a large request in hundreds of ranges on many threads
// at once, and each range then starts at its slice by a binary search
// instead of walking the chain from the message's start.
class ByteBufferRows final : public RowSource {
 public:
  ByteBufferRows(const grpc::ByteBuffer* buffer, int64_t offset, int64_t size);
  size_t size_bytes() const override { return static_cast<size_t>(size_); }
  void CopyRange(size_t offset, size_t bytes, std::byte* dest, CopyStores stores) const override;

 private:
  int64_t size_;
  // The score bytes' pieces in order, and where each starts among them.
  std::vector<const std::byte*> piece_data_;
  std::vector<size_t> piece_start_;
};

}  // namespace topk::server
