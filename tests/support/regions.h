// Shared-memory regions for the region suites: a server with regions on,
// a session, and rows laid out in a segment in each layout the protocol
// has, with NaN in every byte a request must not read (so a read past a
// row's length fails the request instead of passing unnoticed).
#pragma once

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "support/test_server.h"
#include "topk/client/regions.h"

namespace topk::server::test {

// The session's regions as ListRegions reports them (NOT_FOUND once the
// session is gone).
inline absl::StatusOr<std::vector<v1::RegionInfo>> ListFor(const client::Client& client,
                                                           const std::string& session) {
  auto stub = v1::TopK::NewStub(client.channel());
  grpc::ClientContext context;
  v1::ListRegionsRequest request;
  request.set_session_id(session);
  v1::ListRegionsResponse response;
  const grpc::Status status = stub->ListRegions(&context, request, &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  return std::vector<v1::RegionInfo>(response.regions().begin(), response.regions().end());
}

inline ServerOptions RegionServerOptions() {
  ServerOptions options = SmallOptions();
  options.regions.enabled = true;
  return options;
}

// A shared-memory name no other test (or test process) uses.
inline std::string UniqueShmName(const std::string& tag) {
  static std::atomic<int> counter{0};
  return absl::StrCat("/topk-test-", getpid(), "-", tag, "-", counter.fetch_add(1));
}

inline client::SharedMemorySegment MakeSegment(const std::string& tag, size_t bytes) {
  absl::StatusOr<client::SharedMemorySegment> segment =
      client::SharedMemorySegment::Create(UniqueShmName(tag), bytes);
  EXPECT_TRUE(segment.ok()) << segment.status();
  return *std::move(segment);
}

enum class RowLayout { kPitched, kPackedOffsets };

// `rows` written into a fresh segment: scores at byte 0 (pitched with
// `pitch` elements, or packed in reverse row order with gaps), then the
// int64 row offsets, then the int32 lengths, then room for an M x stride
// output of indices and one of values (filled with a sentinel).
struct SegmentRows {
  client::SharedMemorySegment segment;
  int64_t num_rows = 0;
  int64_t pitch = 0;
  uint64_t offsets_at = 0;
  uint64_t lengths_at = 0;
  uint64_t indices_at = 0;
  uint64_t values_at = 0;
  int64_t stride = 0;

  static constexpr int32_t kSentinel = 0x7eadbeef;

  const int32_t* indices() const { return segment.at<int32_t>(indices_at); }
  const float* values() const { return segment.at<float>(values_at); }
};

inline uint64_t AlignUp(uint64_t bytes, uint64_t to) { return (bytes + to - 1) / to * to; }

inline SegmentRows LayOut(const tools::PackedRows& rows, RowLayout layout, int64_t stride) {
  const int64_t m = static_cast<int64_t>(rows.lengths.size());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<int64_t> starts(m);
  int64_t score_elements = 0;
  int64_t pitch = 0;
  if (layout == RowLayout::kPitched) {
    pitch = rows.width + 3;  // padding after every row
    for (int64_t r = 0; r < m; ++r) starts[r] = r * pitch;
    score_elements = m * pitch;
  } else {
    // Last row first, a 5-element gap before each row.
    for (int64_t r = m - 1; r >= 0; --r) {
      score_elements += 5;
      starts[r] = score_elements;
      score_elements += rows.lengths[r];
    }
  }
  SegmentRows out;
  out.num_rows = m;
  out.pitch = pitch;
  out.stride = stride;
  out.offsets_at = AlignUp(score_elements * sizeof(float), 64);
  out.lengths_at = out.offsets_at + AlignUp(m * sizeof(int64_t), 64);
  out.indices_at = out.lengths_at + AlignUp(m * sizeof(int32_t), 64);
  out.values_at = out.indices_at + AlignUp(m * stride * sizeof(int32_t), 64);
  const uint64_t total = out.values_at + AlignUp(m * stride * sizeof(float), 64);
  out.segment = MakeSegment("rows", total);
  float* scores = out.segment.at<float>(0);
  for (int64_t i = 0; i < score_elements; ++i) scores[i] = nan;
  for (int64_t r = 0; r < m; ++r) {
    std::memcpy(scores + starts[r], rows.scores.data() + rows.offsets[r],
                rows.lengths[r] * sizeof(float));
  }
  std::memcpy(out.segment.at<int64_t>(out.offsets_at), starts.data(), m * sizeof(int64_t));
  std::memcpy(out.segment.at<int32_t>(out.lengths_at), rows.lengths.data(), m * sizeof(int32_t));
  int32_t* indices = out.segment.at<int32_t>(out.indices_at);
  float* values = out.segment.at<float>(out.values_at);
  for (int64_t i = 0; i < m * stride; ++i) {
    indices[i] = SegmentRows::kSentinel;
    values[i] = -12345.0f;
  }
  return out;
}

// The in-place answer as a client result (for the verifier).
inline client::SelectResult ReadBack(const SegmentRows& laid, int32_t k, bool with_values) {
  client::SelectResult result{.num_rows = laid.num_rows, .k = k};
  for (int64_t r = 0; r < laid.num_rows; ++r) {
    for (int32_t j = 0; j < k; ++j) {
      result.indices.push_back(laid.indices()[r * laid.stride + j]);
      if (with_values) result.values.push_back(laid.values()[r * laid.stride + j]);
    }
  }
  return result;
}

}  // namespace topk::server::test
