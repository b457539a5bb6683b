// Select by reference over POSIX shared memory through the real server:
// every row layout, lengths inline and in a region, the answer in place (at
// stride K and wider) or in the response, each checked by the exactness
// verifier; and the region RPCs themselves (register, list, unregister).
#include <cmath>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "support/raw_calls.h"
#include "support/regions.h"

namespace topk::server::test {
namespace {

using testing::Distribution;
using testing::LengthPattern;

struct LayoutCase {
  RowLayout layout;
  bool lengths_in_region;
  int64_t extra_stride;  // output row stride = k + extra_stride
  bool return_values;
  bool sorted;
};

class RegionSelect : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(RegionSelect, InPlaceAnswerIsExact) {
  const LayoutCase c = GetParam();
  TestServer t = StartServer(RegionServerOptions());
  ASSERT_NE(t.client, nullptr);
  absl::StatusOr<std::unique_ptr<client::RegionSession>> session =
      client::RegionSession::Open(*t.client);
  ASSERT_TRUE(session.ok()) << session.status();

  const int32_t k = 100;
  const tools::PackedRows rows =
      Rows(Distribution::kBf16Ties, 9, 5000, LengthPattern::kEdges, 7, k);
  SegmentRows laid = LayOut(rows, c.layout, k + c.extra_stride);
  ASSERT_TRUE((*session)->Register("seg", laid.segment).ok());

  client::RegionRowsRef ref;
  ref.scores = {"seg", 0};
  ref.num_rows = static_cast<int32_t>(laid.num_rows);
  if (c.layout == RowLayout::kPitched) {
    ref.row_pitch = laid.pitch;
  } else {
    ref.row_offsets = client::RegionSlice{"seg", laid.offsets_at};
  }
  if (c.lengths_in_region) {
    ref.lengths_ref = client::RegionSlice{"seg", laid.lengths_at};
  } else {
    ref.lengths = rows.lengths;
  }
  client::RegionOutputRef out{.indices = {"seg", laid.indices_at},
                              .row_stride = k + c.extra_stride};
  if (c.return_values) out.values = client::RegionSlice{"seg", laid.values_at};
  const client::CallOptions options{.sorted = c.sorted, .return_values = c.return_values};

  absl::StatusOr<client::SelectResult> reply = (*session)->Select(k, ref, &out, options);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->indices.empty());  // the answer is in the segment
  EXPECT_EQ(reply->num_rows, laid.num_rows);

  const client::SelectResult answer = ReadBack(laid, k, c.return_values);
  EXPECT_TRUE(tools::Verify(rows, k, {.sorted = c.sorted}, answer).ok());
  for (int64_t r = 0; r < laid.num_rows; ++r) {
    // Elements of an output row past K are the client's: untouched.
    for (int64_t j = k; j < laid.stride; ++j) {
      EXPECT_EQ(laid.indices()[r * laid.stride + j], SegmentRows::kSentinel) << r << "," << j;
    }
    if (!c.return_values) continue;
    const float* row = rows.scores.data() + rows.offsets[r];
    for (int32_t j = 0; j < k; ++j) {
      const int32_t i = answer.indices[r * k + j];
      const float v = answer.values[r * k + j];
      if (i < 0) {
        EXPECT_TRUE(std::isnan(v));
      } else {
        EXPECT_EQ(std::memcmp(&v, &row[i], sizeof(float)), 0) << "row " << r << " slot " << j;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, RegionSelect,
    ::testing::Values(LayoutCase{RowLayout::kPitched, false, 0, false, false},
                      LayoutCase{RowLayout::kPitched, true, 0, true, true},
                      LayoutCase{RowLayout::kPitched, false, 7, true, false},
                      LayoutCase{RowLayout::kPackedOffsets, false, 0, false, true},
                      LayoutCase{RowLayout::kPackedOffsets, true, 3, false, false},
                      LayoutCase{RowLayout::kPackedOffsets, true, 0, true, false}));

TEST(RegionSelectReply, RowsByReferenceAnswerInTheResponse) {
  TestServer t = StartServer(RegionServerOptions());
  auto session = client::RegionSession::Open(*t.client);
  ASSERT_TRUE(session.ok()) << session.status();
  const int32_t k = 64;
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 12, 20000, LengthPattern::kRandom);
  SegmentRows laid = LayOut(rows, RowLayout::kPitched, k);
  ASSERT_TRUE((*session)->Register("seg", laid.segment).ok());
  client::RegionRowsRef ref;
  ref.scores = {"seg", 0};
  ref.num_rows = static_cast<int32_t>(laid.num_rows);
  ref.row_pitch = laid.pitch;
  ref.lengths = rows.lengths;
  absl::StatusOr<client::SelectResult> result =
      (*session)->Select(k, ref, nullptr, {.deterministic = true});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(tools::Verify(rows, k, {.deterministic = true}, *result).ok());
  // Same answer as inline, bit for bit (deterministic).
  absl::StatusOr<client::SelectResult> inline_result =
      t.client->Select(k, rows.view(), {.deterministic = true});
  ASSERT_TRUE(inline_result.ok());
  EXPECT_EQ(result->indices, inline_result->indices);
}

TEST(RegionRpcs, RegisterListUnregister) {
  TestServer t = StartServer(RegionServerOptions());
  auto session = client::RegionSession::Open(*t.client);
  ASSERT_TRUE(session.ok()) << session.status();
  client::SharedMemorySegment a = MakeSegment("a", 4096);
  client::SharedMemorySegment b = MakeSegment("b", 3 * 4096);
  ASSERT_TRUE((*session)->Register("b", b).ok());
  ASSERT_TRUE((*session)->RegisterShm("a", a.name(), 100, 1000).ok());
  EXPECT_EQ((*session)->Register("a", a).code(), absl::StatusCode::kAlreadyExists);

  absl::StatusOr<std::vector<v1::RegionInfo>> listed = (*session)->List();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].name(), "a");
  EXPECT_EQ((*listed)[0].byte_size(), 1000u);
  EXPECT_EQ((*listed)[0].kind(), "shm");
  EXPECT_EQ((*listed)[0].device_ordinal(), -1);
  EXPECT_EQ((*listed)[1].name(), "b");
  EXPECT_EQ((*listed)[1].byte_size(), 3u * 4096);

  EXPECT_TRUE((*session)->Unregister("a").ok());
  EXPECT_EQ((*session)->Unregister("a").code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE((*session)->RegisterShm("c", a.name(), 0, 4096).ok());
  absl::StatusOr<int> removed = (*session)->UnregisterAll();
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 2);
  listed = (*session)->List();
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
}

TEST(RegionRpcs, SessionsDoNotSeeEachOthersRegions) {
  TestServer t = StartServer(RegionServerOptions());
  auto mine = client::RegionSession::Open(*t.client);
  auto theirs = client::RegionSession::Open(*t.client);
  ASSERT_TRUE(mine.ok() && theirs.ok());
  EXPECT_NE((*mine)->id(), (*theirs)->id());
  client::SharedMemorySegment segment = MakeSegment("iso", 4096);
  ASSERT_TRUE((*mine)->Register("x", segment).ok());
  // The same name in another session is another region.
  ASSERT_TRUE((*theirs)->Register("x", segment).ok());
  EXPECT_TRUE((*theirs)->Unregister("x").ok());
  absl::StatusOr<std::vector<v1::RegionInfo>> listed = (*mine)->List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name(), "x");
}

TEST(RegionRpcs, ServerInfoReportsRegions) {
  TestServer on = StartServer(RegionServerOptions());
  TestServer off = StartServer();
  absl::StatusOr<v1::ServerInfo> a = on.client->GetServerInfo();
  absl::StatusOr<v1::ServerInfo> b = off.client->GetServerInfo();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->regions_enabled());
  EXPECT_FALSE(b->regions_enabled());
}

// OpenSession's reply stream as raw bytes: the status it ends with (after
// the session event when it opened).
grpc::Status RawOpenSession(const std::shared_ptr<grpc::Channel>& channel,
                            const std::string& request, std::string* event) {
  RawStream session(channel, "/topk.v1.TopK/OpenSession");
  session.Write(request);
  session.WritesDone();
  if (std::optional<std::string> bytes = session.Read()) {
    *event = *std::move(bytes);
    session.Cancel();  // the session stays open otherwise
  }
  return session.Finish();
}

TEST(RegionRpcs, GarbageBodiesAreInvalidArgumentNamingTheMessage) {
  TestServer t = StartServer(RegionServerOptions());
  const std::string garbage = "\xff\xff\xff not a message";
  const std::pair<const char*, const char*> methods[] = {
      {"/topk.v1.TopK/RegisterRegion", "topk.v1.RegisterRegionRequest"},
      {"/topk.v1.TopK/UnregisterRegion", "topk.v1.UnregisterRegionRequest"},
      {"/topk.v1.TopK/ListRegions", "topk.v1.ListRegionsRequest"}};
  for (const auto& [method, message] : methods) {
    SCOPED_TRACE(method);
    const grpc::Status status = RawUnary(t.client->channel(), method, garbage).status;
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_TRUE(absl::StrContains(status.error_message(), message)) << status.error_message();
  }
  std::string event;
  const grpc::Status refused = RawOpenSession(t.client->channel(), garbage, &event);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << refused.error_message();
  EXPECT_TRUE(absl::StrContains(refused.error_message(), "topk.v1.OpenSessionRequest"))
      << refused.error_message();
  EXPECT_TRUE(event.empty());
  // Each refusal counted by code.
  absl::StatusOr<v1::Stats> stats = t.client->GetStats(/*include_prometheus_text=*/true);
  ASSERT_TRUE(stats.ok());
  EXPECT_TRUE(absl::StrContains(stats->prometheus_text(),
                                "topk_region_rpc_errors_total{code=\"INVALID_ARGUMENT\"} 4"))
      << stats->prometheus_text();
  // Well-formed bodies still work: a raw session opens, and its id lists.
  const grpc::Status opened = RawOpenSession(t.client->channel(), "", &event);
  EXPECT_EQ(opened.error_code(), grpc::StatusCode::CANCELLED) << opened.error_message();
  v1::SessionEvent parsed;
  ASSERT_TRUE(parsed.ParseFromString(event));
  EXPECT_EQ(parsed.session_id().size(), 32u);
  auto session = client::RegionSession::Open(*t.client);
  ASSERT_TRUE(session.ok()) << session.status();
  v1::ListRegionsRequest list;
  list.set_session_id((*session)->id());
  const RawReply listed =
      RawUnary(t.client->channel(), "/topk.v1.TopK/ListRegions", list.SerializeAsString());
  EXPECT_TRUE(listed.status.ok()) << listed.status.error_message();
}

}  // namespace
}  // namespace topk::server::test
