// SelectPipeline through the real server: many requests in flight on one
// stream, replies matched to requests by request_id, every answer exact;
// malformed references answered with the status unary Select gives, without
// ending the stream; garbage bytes and inline rows on the same stream; the
// metrics count each request once; lame duck refuses new requests and ends
// the idle stream.
#include <map>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "support/raw_calls.h"
#include "support/regions.h"

namespace topk::server::test {
namespace {

using testing::Distribution;
using testing::LengthPattern;

constexpr int32_t kK = 24;
constexpr int kVariants = 4;

uint64_t ErrorCount(const v1::Stats& stats) {
  uint64_t total = 0;
  for (const auto& [code, count] : stats.errors()) total += count;
  return total;
}

class Pipeline : public ::testing::Test {
 protected:
  void SetUp() override {
    t_ = StartServer(RegionServerOptions());
    ASSERT_NE(t_.client, nullptr);
    auto session = client::RegionSession::Open(*t_.client);
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = *std::move(session);
    for (int v = 0; v < kVariants; ++v) {
      rows_.push_back(
          Rows(Distribution::kIndexer, 3 + v, 3000, LengthPattern::kRandom, 10 + v, kK));
      laid_.push_back(LayOut(rows_.back(), RowLayout::kPitched, kK));
      ASSERT_TRUE(session_->Register(Name(v), laid_.back().segment).ok());
    }
  }

  static std::string Name(int v) { return absl::StrCat("seg", v); }

  v1::SelectRequest Valid(int v, const std::string& id) const {
    client::RegionRowsRef ref;
    ref.scores = {Name(v), 0};
    ref.num_rows = static_cast<int32_t>(laid_[v].num_rows);
    ref.row_pitch = laid_[v].pitch;
    ref.lengths = rows_[v].lengths;
    const client::RegionOutputRef out{.indices = {Name(v), laid_[v].indices_at}};
    return session_->MakeRequest(kK, ref, &out, {.deterministic = true, .request_id = id});
  }

  // Request i: valid, or broken in one of the ways region_fault_test covers.
  v1::SelectRequest Request(int i) const {
    const std::string id = absl::StrCat("req-", i);
    v1::SelectRequest request = Valid(i % kVariants, id);
    switch (i % 5) {
      case 1:
        request.mutable_region_rows()->mutable_scores()->set_region("nope");
        break;
      case 3:
        request.mutable_output()->mutable_indices()->set_offset(2);  // misaligned
        break;
      case 4:
        request.mutable_region_rows()->set_row_pitch(int64_t{1} << 40);  // past the end
        break;
      default:
        break;
    }
    return request;
  }

  TestServer t_;
  std::unique_ptr<client::RegionSession> session_;
  std::vector<tools::PackedRows> rows_;
  std::vector<SegmentRows> laid_;
};

TEST_F(Pipeline, ManyInFlightRepliesMatchTheirRequestsAndAnswersAreExact) {
  // More than the server keeps in flight per stream (64): it pauses reading.
  constexpr int kRequests = 150;
  absl::StatusOr<v1::Stats> before = t_.client->GetStats();
  ASSERT_TRUE(before.ok());
  absl::StatusOr<std::unique_ptr<client::SelectPipeline>> pipeline =
      client::SelectPipeline::Open(t_.client->channel());
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  // All sent before any reply is read: up to max_pipelined are in flight,
  // the rest wait on flow control.
  std::thread sender([&] {
    for (int i = 0; i < kRequests; ++i) ASSERT_TRUE((*pipeline)->Send(Request(i)).ok());
  });
  std::map<std::string, v1::SelectReply> replies;
  for (int i = 0; i < kRequests; ++i) {
    absl::StatusOr<v1::SelectReply> reply = (*pipeline)->Receive();
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_TRUE(replies.emplace(reply->request_id(), *reply).second) << reply->request_id();
  }
  sender.join();
  ASSERT_EQ(replies.size(), static_cast<size_t>(kRequests));
  int failed = 0;
  for (int i = 0; i < kRequests; ++i) {
    const v1::SelectRequest request = Request(i);
    SCOPED_TRACE(request.request_id());
    ASSERT_TRUE(replies.contains(request.request_id()));
    const v1::SelectReply& reply = replies[request.request_id()];
    // The same request as a unary call: the same status, word for word.
    absl::StatusOr<client::SelectResult> unary = t_.client->Select(request);
    EXPECT_EQ(reply.code(), static_cast<int>(unary.status().code())) << reply.message();
    EXPECT_EQ(reply.message(), unary.status().message());
    if (reply.code() != 0) {
      ++failed;
      EXPECT_FALSE(reply.has_response());
      continue;
    }
    EXPECT_EQ(reply.response().request_id(), request.request_id());
    EXPECT_EQ(reply.response().num_rows(), laid_[i % kVariants].num_rows);
    EXPECT_TRUE(reply.response().indices().empty());  // in the segment
  }
  EXPECT_EQ(failed, kRequests / 5 * 3);
  for (int v = 0; v < kVariants; ++v) {
    EXPECT_TRUE(
        tools::Verify(rows_[v], kK, {.deterministic = true}, ReadBack(laid_[v], kK, false)).ok())
        << v;
  }
  // Each pipelined request counted once, as unary ones are (the unary
  // comparisons above add as many again).
  absl::StatusOr<v1::Stats> after = t_.client->GetStats();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->requests() - before->requests(), 2u * kRequests);
  EXPECT_EQ(ErrorCount(*after) - ErrorCount(*before), 2u * failed);
}

// Serialized messages on a raw SelectPipeline: every reply's bytes, and
// how the stream ended.
struct RawPipelineResult {
  std::vector<v1::SelectReply> replies;
  grpc::Status status;
};

RawPipelineResult RawPipeline(const std::shared_ptr<grpc::Channel>& channel,
                              const std::vector<std::string>& messages) {
  RawStream pipeline(channel, "/topk.v1.TopK/SelectPipeline");
  for (const std::string& message : messages) pipeline.Write(message);
  pipeline.WritesDone();
  RawPipelineResult result;
  while (std::optional<std::string> bytes = pipeline.Read()) {
    v1::SelectReply reply;
    EXPECT_TRUE(reply.ParseFromString(*bytes));
    result.replies.push_back(reply);
  }
  result.status = pipeline.Finish();
  return result;
}

TEST_F(Pipeline, GarbageAndInlineRowsShareTheStream) {
  const tools::PackedRows inline_rows =
      Rows(Distribution::kIndexer, 5, 700, LengthPattern::kRandom);
  v1::SelectRequest by_value = client::Client::MakeRequest(
      kK, inline_rows.view(), {.deterministic = true, .request_id = "inline"});
  const RawPipelineResult result = RawPipeline(
      t_.client->channel(),
      {"\xff\xff\xff garbage", by_value.SerializeAsString(), Valid(0, "ref").SerializeAsString()});
  EXPECT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_EQ(result.replies.size(), 3u);
  std::map<std::string, v1::SelectReply> by_id;
  for (const v1::SelectReply& reply : result.replies) by_id[reply.request_id()] = reply;
  ASSERT_EQ(by_id.size(), 3u);
  EXPECT_EQ(by_id[""].code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_TRUE(absl::StrContains(by_id[""].message(), "not a valid topk.v1.SelectRequest"))
      << by_id[""].message();
  ASSERT_EQ(by_id["inline"].code(), 0) << by_id["inline"].message();
  absl::StatusOr<client::SelectResult> answer = client::ToResult(by_id["inline"], false);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_TRUE(tools::Verify(inline_rows, kK, {.deterministic = true}, *answer).ok());
  ASSERT_EQ(by_id["ref"].code(), 0) << by_id["ref"].message();
  EXPECT_TRUE(
      tools::Verify(rows_[0], kK, {.deterministic = true}, ReadBack(laid_[0], kK, false)).ok());
}

TEST_F(Pipeline, ASessionThatEndedIsNotFoundOnAStreamThatUsedIt) {
  absl::StatusOr<std::unique_ptr<client::SelectPipeline>> pipeline =
      client::SelectPipeline::Open(t_.client->channel());
  ASSERT_TRUE(pipeline.ok());
  // Answer in the reply: the segment goes with the session below.
  v1::SelectRequest request = Valid(1, "again");
  request.clear_output();
  absl::StatusOr<client::SelectResult> first = (*pipeline)->Call(request);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(tools::Verify(rows_[1], kK, {.deterministic = true}, *first).ok());
  session_.reset();  // ends the session; the stream has used it
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<client::SelectResult> after = (*pipeline)->Call(request);
    ASSERT_FALSE(after.ok() && i > 100) << "the ended session still answers";
    if (after.ok()) {  // the server has not seen the session end yet
      absl::SleepFor(absl::Milliseconds(10));
      continue;
    }
    EXPECT_EQ(after.status().code(), absl::StatusCode::kNotFound) << after.status();
    EXPECT_TRUE(absl::StrContains(after.status().message(), "session_id")) << after.status();
    EXPECT_EQ(after.status().message(), t_.client->Select(request).status().message());
    return;
  }
  FAIL() << "the ended session was never refused";
}

TEST_F(Pipeline, LameDuckRefusesNewRequestsAndEndsTheIdleStream) {
  absl::StatusOr<std::unique_ptr<client::SelectPipeline>> pipeline =
      client::SelectPipeline::Open(t_.client->channel());
  ASSERT_TRUE(pipeline.ok());
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 2, 500);
  const v1::SelectRequest request = client::Client::MakeRequest(kK, rows.view(), {});
  absl::StatusOr<client::SelectResult> before = (*pipeline)->Call(request);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_TRUE(tools::Verify(rows, kK, {}, *before).ok());
  session_.reset();  // a session stream would be ended too; this one is about the pipeline
  const absl::Time start = absl::Now();
  std::thread drain([&] { t_.server->Shutdown(absl::Seconds(20)); });
  // Past the dispatch grace (a request read within it is served, as a unary
  // call is: tests/e2e/lame_duck_test), within the drain's idle timeout.
  absl::SleepFor(CallLimits().drain_dispatch_grace + absl::Milliseconds(150));
  absl::StatusOr<client::SelectResult> refused = (*pipeline)->Call(request);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "retry")) << refused.status();
  EXPECT_TRUE((*pipeline)->healthy());  // a refused request, not a broken stream
  // Idle again: the server ends the stream within its drain idle timeout.
  absl::StatusOr<v1::SelectReply> end = (*pipeline)->Receive();
  EXPECT_FALSE(end.ok());
  EXPECT_EQ(end.status().code(), absl::StatusCode::kUnavailable) << end.status();
  drain.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

}  // namespace
}  // namespace topk::server::test
