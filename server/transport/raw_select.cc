#include "server/transport/raw_select.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/stubs/common.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace topk::server {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// Field numbers of topk.v1.SelectRequest and InlineRows (topk.proto).
constexpr int kK = v1::SelectRequest::kKFieldNumber;
constexpr int kOptions = v1::SelectRequest::kOptionsFieldNumber;
constexpr int kInlineRows = v1::SelectRequest::kInlineRowsFieldNumber;
constexpr int kRequestId = v1::SelectRequest::kRequestIdFieldNumber;
constexpr int kRegionRows = v1::SelectRequest::kRegionRowsFieldNumber;
constexpr int kOutput = v1::SelectRequest::kOutputFieldNumber;
constexpr int kSessionId = v1::SelectRequest::kSessionIdFieldNumber;
constexpr int kOrdering = v1::SelectRequest::kOrderingFieldNumber;
constexpr int kScores = v1::InlineRows::kScoresFieldNumber;
constexpr int kLengths = v1::InlineRows::kLengthsFieldNumber;
constexpr int kDtype = v1::InlineRows::kDtypeFieldNumber;

absl::Status Malformed(const char* what) {
  return absl::InvalidArgumentError(
      absl::StrCat("request: not a valid topk.v1.SelectRequest (", what, ")"));
}

// gRPC's reader is read-only in practice; its constructor just wants a
// non-const pointer to hand to grpc_byte_buffer_reader_init.
grpc::ByteBuffer* Mutable(const grpc::ByteBuffer* buffer) {
  return const_cast<grpc::ByteBuffer*>(buffer);
}

// A length prefix, refused when it runs past the bytes left in the enclosing
// field or message (protobuf refuses such a message as truncated). The whole
// message is itself a limit, so BytesUntilLimit() is always known.
bool ReadSize(CodedInputStream& in, int& size) {
  uint32_t value = 0;
  if (!in.ReadVarint32(&value) || static_cast<int64_t>(value) > in.BytesUntilLimit()) {
    return false;
  }
  size = static_cast<int>(value);
  return true;
}

// The next tag, 0 at the end of the enclosing limit. protobuf's parser
// refuses a tag longer than 5 bytes, which CodedInputStream::ReadTag reads
// (truncated to 32 bits) without complaint: refused here too.
absl::StatusOr<uint32_t> NextTag(CodedInputStream& in) {
  constexpr int kMaxTagBytes = 5;
  const int start = in.CurrentPosition();
  const uint32_t tag = in.ReadTag();
  if (in.CurrentPosition() - start > kMaxTagBytes) return Malformed("a tag over 5 bytes");
  return tag;
}

// Stores at most `keep` lengths (the rest are only counted), so a flood of
// lengths cannot make the server allocate more than the row limit allows.
bool ReadLengths(CodedInputStream& in, uint32_t tag, size_t keep, RawSelectRequest& out) {
  auto add = [&](uint32_t value) {
    if (out.lengths.size() < keep) out.lengths.push_back(static_cast<int32_t>(value));
    ++out.num_lengths;
  };
  uint32_t value = 0;
  if (WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_VARINT) {
    if (!in.ReadVarint32(&value)) return false;
    add(value);
    return true;
  }
  // Packed (what every proto3 writer sends).
  int bytes = 0;
  if (!ReadSize(in, bytes)) return false;
  const CodedInputStream::Limit limit = in.PushLimit(bytes);
  while (in.BytesUntilLimit() > 0) {
    if (!in.ReadVarint32(&value)) return false;
    add(value);
  }
  in.PopLimit(limit);
  return true;
}

absl::Status ReadInlineRows(CodedInputStream& in, size_t keep, RawSelectRequest& out) {
  int bytes = 0;
  if (!ReadSize(in, bytes)) return Malformed("inline_rows length");
  const CodedInputStream::Limit limit = in.PushLimit(bytes);
  out.has_inline_rows = true;
  while (true) {
    absl::StatusOr<uint32_t> next = NextTag(in);
    if (!next.ok()) return next.status();
    const uint32_t tag = *next;
    if (tag == 0) break;
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const auto type = WireFormatLite::GetTagWireType(tag);
    if (field == kScores && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      int size = 0;
      if (!ReadSize(in, size)) return Malformed("scores length");
      // Last one wins, as protobuf merges a repeated singular field.
      out.scores_offset = in.CurrentPosition();
      out.scores_size = size;
      if (!in.Skip(size)) return Malformed("scores truncated");
    } else if (field == kLengths && (type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED ||
                                     type == WireFormatLite::WIRETYPE_VARINT)) {
      if (!ReadLengths(in, tag, keep, out)) return Malformed("lengths");
    } else if (field == kDtype && type == WireFormatLite::WIRETYPE_VARINT) {
      // An enum is an int32 varint: negative values come as 10-byte varints.
      uint64_t value = 0;
      if (!in.ReadVarint64(&value)) return Malformed("dtype");
      out.dtype = static_cast<int32_t>(value);
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return Malformed("inline_rows field");
    }
  }
  if (!in.ConsumedEntireMessage()) return Malformed("inline_rows");
  in.PopLimit(limit);
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseRawSelect(const grpc::ByteBuffer& buffer, size_t max_rows,
                            RawSelectRequest& out) {
  const size_t keep = max_rows + 1;  // one more than allowed: enough to refuse
  if (buffer.Length() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return Malformed("larger than 2 GiB");
  }
  grpc::ProtoBufferReader reader(Mutable(&buffer));
  CodedInputStream in(&reader);
  in.SetTotalBytesLimit(std::numeric_limits<int>::max());
  in.PushLimit(static_cast<int>(buffer.Length()));
  while (true) {
    absl::StatusOr<uint32_t> next = NextTag(in);
    if (!next.ok()) return next.status();
    const uint32_t tag = *next;
    if (tag == 0) break;
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const auto type = WireFormatLite::GetTagWireType(tag);
    if (field == kK && type == WireFormatLite::WIRETYPE_VARINT) {
      uint32_t k = 0;
      if (!in.ReadVarint32(&k)) return Malformed("k");
      out.k = static_cast<int32_t>(k);
    } else if (field == kOptions && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      int size = 0;
      std::string bytes;
      if (!ReadSize(in, size) || !in.ReadString(&bytes, size) ||
          !out.options.MergeFromString(bytes)) {
        return Malformed("options");
      }
    } else if (field == kInlineRows && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (absl::Status s = ReadInlineRows(in, keep, out); !s.ok()) return s;
    } else if (field == kRequestId && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      int size = 0;
      if (!ReadSize(in, size) || !in.ReadString(&out.request_id, size)) {
        return Malformed("request_id");
      }
      // proto3 strings are UTF-8: protobuf refuses the message otherwise, and
      // echoing such an id would make the response unparseable for clients.
      if (!google::protobuf::internal::IsStructurallyValidUTF8(out.request_id)) {
        return Malformed("request_id is not UTF-8");
      }
    } else {
      if (field == kRegionRows || field == kOutput || field == kSessionId || field == kOrdering) {
        out.references_regions = true;
      }
      if (field == kRegionRows && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
        // `rows` is a oneof: region_rows after inline_rows clears them, as
        // protobuf's parse (by_reference) does.
        out.has_inline_rows = false;
        out.lengths.clear();
        out.num_lengths = 0;
        out.scores_offset = 0;
        out.scores_size = 0;
        out.dtype = 0;
      }
      if (!WireFormatLite::SkipField(&in, tag)) return Malformed("field");
    }
  }
  if (!in.ConsumedEntireMessage()) return Malformed("truncated");
  if (out.references_regions) {
    grpc::ProtoBufferReader full(Mutable(&buffer));
    if (!out.by_reference.ParseFromZeroCopyStream(&full)) return Malformed("region fields");
  }
  return absl::OkStatus();
}

ByteBufferRows::ByteBufferRows(const grpc::ByteBuffer* buffer, int64_t offset, int64_t size)
    : size_(size) {
  grpc::ProtoBufferReader reader(Mutable(buffer));
  // Skip takes an int; the message itself is bounded by gRPC's int sizes.
  if (offset > 0) reader.Skip(static_cast<int>(offset));
  size_t listed = 0;
  const void* data = nullptr;
  int piece = 0;
  while (listed < static_cast<size_t>(size) && reader.Next(&data, &piece)) {
    if (piece <= 0) continue;  // an empty slice holds nothing to copy
    piece_data_.push_back(static_cast<const std::byte*>(data));
    piece_start_.push_back(listed);
    listed += static_cast<size_t>(piece);
  }
}

void ByteBufferRows::CopyRange(size_t offset, size_t bytes, std::byte* dest,
                               CopyStores stores) const {
  if (bytes == 0 || piece_start_.empty()) return;
  // The last piece starting at or before `offset`.
  size_t p =
      static_cast<size_t>(std::upper_bound(piece_start_.begin(), piece_start_.end(), offset) -
                          piece_start_.begin() - 1);
  size_t within = offset - piece_start_[p];
  while (bytes > 0 && p < piece_data_.size()) {
    const size_t end =
        p + 1 < piece_start_.size() ? piece_start_[p + 1] : static_cast<size_t>(size_);
    const size_t take = std::min(bytes, end - piece_start_[p] - within);
    CopyBytes(dest, piece_data_[p] + within, take, stores);
    dest += take;
    bytes -= take;
    within = 0;
    ++p;
  }
}

}  // namespace topk::server
