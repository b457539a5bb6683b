// Channels through the real server on the CPU backend, the rows, lengths and
// outputs in shared memory and every call made from the host through the
// control block (the GPU path is channel_torch_test.py's, on a device):
// exact answers at random live M, every descriptor field refused with its
// status word while the output stays untouched, NaN and bad lengths, the
// limits, and the channel's end with its session.
#include "topk/client/channel.h"

#include <sys/stat.h>

#include <algorithm>
#include <random>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "support/regions.h"

namespace topk::server::test {
namespace {

using testing::Distribution;
using testing::LengthPattern;

constexpr int32_t kK = 64;
constexpr int64_t kRows = 12;
constexpr int64_t kWidth = 3000;

struct ChannelFixture {
  TestServer server;
  std::unique_ptr<client::RegionSession> session;
  tools::PackedRows rows;
  SegmentRows laid;
  std::unique_ptr<client::Channel> channel;

  static ChannelFixture Make(ServerOptions options = RegionServerOptions(),
                             bool return_values = false) {
    ChannelFixture f;
    f.server = StartServer(options);
    auto session = client::RegionSession::Open(*f.server.client);
    EXPECT_TRUE(session.ok()) << session.status();
    f.session = *std::move(session);
    f.rows = Rows(Distribution::kBf16Ties, kRows, kWidth, LengthPattern::kEdges, 11, kK);
    f.laid = LayOut(f.rows, RowLayout::kPitched, kK + 3);
    EXPECT_TRUE(f.session->Register("seg", f.laid.segment).ok());
    auto channel = client::Channel::Open(*f.session, {.k = kK,
                                                      .return_values = return_values,
                                                      .max_rows = kRows,
                                                      .max_width = kWidth,
                                                      .regions = {"seg"}});
    EXPECT_TRUE(channel.ok()) << channel.status();
    if (channel.ok()) f.channel = *std::move(channel);
    return f;
  }

  // A valid call over the first `m` rows.
  topk_channel_descriptor Call(int64_t m) const {
    return topk_channel_descriptor{.num_rows = static_cast<uint32_t>(m),
                                   .values_region = TOPK_CHANNEL_NO_REGION,
                                   .row_pitch = static_cast<uint64_t>(laid.pitch),
                                   .lengths_offset = laid.lengths_at,
                                   .indices_offset = laid.indices_at,
                                   .out_row_stride = static_cast<uint64_t>(laid.stride)};
  }

  bool OutputUntouched() const {
    for (int64_t i = 0; i < laid.num_rows * laid.stride; ++i) {
      if (laid.indices()[i] != SegmentRows::kSentinel) return false;
    }
    return true;
  }
};

// The first m rows of `rows`.
tools::PackedRows FirstRows(const tools::PackedRows& rows, int64_t m) {
  tools::PackedRows first = rows;
  first.lengths.resize(m);
  first.offsets.resize(m);
  return first;
}

TEST(Channel, ExactAtEveryLiveRowCount) {
  ChannelFixture f = ChannelFixture::Make();
  ASSERT_NE(f.channel, nullptr);
  std::mt19937 random(5);
  for (int call = 0; call < 40; ++call) {
    const int64_t m = 1 + random() % kRows;
    for (int64_t i = 0; i < f.laid.num_rows * f.laid.stride; ++i) {
      f.laid.segment.at<int32_t>(f.laid.indices_at)[i] = SegmentRows::kSentinel;
    }
    ASSERT_TRUE(f.channel->CallOnHost(f.Call(m)).ok()) << "call " << call << " m " << m;
    client::SelectResult answer{.num_rows = m, .k = kK};
    for (int64_t r = 0; r < m; ++r) {
      for (int32_t j = 0; j < kK; ++j)
        answer.indices.push_back(f.laid.indices()[r * f.laid.stride + j]);
    }
    EXPECT_TRUE(tools::Verify(FirstRows(f.rows, m), kK, {}, answer).ok()) << "call " << call;
    // Rows past the live M stay untouched.
    for (int64_t i = m * f.laid.stride; i < kRows * f.laid.stride; ++i) {
      ASSERT_EQ(f.laid.indices()[i], SegmentRows::kSentinel) << "call " << call;
    }
  }
  EXPECT_EQ(f.channel->calls(), 40u);
  EXPECT_EQ(f.channel->errors(), 0u);
  absl::StatusOr<v1::Stats> stats = f.server.client->GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->channel_calls(), 40u);
  EXPECT_EQ(stats->channels_open(), 1);
}

TEST(Channel, ValuesMatchTheRows) {
  ChannelFixture f = ChannelFixture::Make(RegionServerOptions(), /*return_values=*/true);
  ASSERT_NE(f.channel, nullptr);
  topk_channel_descriptor call = f.Call(kRows);
  call.values_region = 0;
  call.values_offset = f.laid.values_at;
  ASSERT_TRUE(f.channel->CallOnHost(call).ok());
  const client::SelectResult answer = ReadBack(f.laid, kK, true);
  EXPECT_TRUE(tools::Verify(f.rows, kK, {}, answer).ok());
  // Without a values region, a values channel refuses the call.
  EXPECT_EQ(f.channel->CallOnHost(f.Call(kRows)).code(), absl::StatusCode::kInvalidArgument);
}

struct BadCall {
  const char* what;
  uint32_t status;
  void (*spoil)(topk_channel_descriptor&, const SegmentRows&);
};

class ChannelRefuses : public ::testing::TestWithParam<BadCall> {};

TEST_P(ChannelRefuses, NamingTheFieldAndTouchingNothing) {
  ChannelFixture f = ChannelFixture::Make();
  ASSERT_NE(f.channel, nullptr);
  topk_channel_descriptor call = f.Call(kRows);
  GetParam().spoil(call, f.laid);
  const absl::Status status = f.channel->CallOnHost(call);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(f.channel->control()->status, GetParam().status) << status;
  EXPECT_NE(status.message().find(topk_channel_status_field(GetParam().status)),
            absl::string_view::npos)
      << status;
  EXPECT_TRUE(f.OutputUntouched());
  // The channel goes on.
  EXPECT_TRUE(f.channel->CallOnHost(f.Call(kRows)).ok());
  EXPECT_EQ(f.channel->errors(), 1u);
}

INSTANTIATE_TEST_SUITE_P(
    Descriptors, ChannelRefuses,
    ::testing::Values(
        BadCall{"rows", TOPK_CHANNEL_BAD_NUM_ROWS,
                [](auto& d, const auto&) { d.num_rows = kRows + 1; }},
        BadCall{"region", TOPK_CHANNEL_BAD_REGION,
                [](auto& d, const auto&) { d.scores_region = 1; }},
        BadCall{"values", TOPK_CHANNEL_BAD_REGION,
                [](auto& d, const auto&) { d.values_region = 0; }},
        BadCall{"scores", TOPK_CHANNEL_BAD_SCORES,
                [](auto& d, const auto& l) { d.scores_offset = l.segment.size() - 64; }},
        BadCall{"huge_offset", TOPK_CHANNEL_BAD_SCORES,
                [](auto& d, const auto&) { d.scores_offset = ~uint64_t{0} - 3; }},
        BadCall{"pitch", TOPK_CHANNEL_BAD_ROW_PITCH, [](auto& d, const auto&) { d.row_pitch = 0; }},
        BadCall{"lengths", TOPK_CHANNEL_BAD_LENGTHS,
                [](auto& d, const auto& l) { d.lengths_offset = l.segment.size(); }},
        BadCall{"indices", TOPK_CHANNEL_BAD_INDICES,
                [](auto& d, const auto& l) { d.indices_offset = l.segment.size() - 8; }},
        BadCall{"stride", TOPK_CHANNEL_BAD_ROW_STRIDE,
                [](auto& d, const auto&) { d.out_row_stride = kK - 1; }},
        BadCall{"misaligned", TOPK_CHANNEL_MISALIGNED,
                [](auto& d, const auto&) { d.scores_offset = 2; }},
        BadCall{"misaligned_out", TOPK_CHANNEL_MISALIGNED,
                [](auto& d, const auto& l) { d.indices_offset = l.indices_at + 1; }},
        BadCall{"overlap", TOPK_CHANNEL_OVERLAP,
                [](auto& d, const auto&) { d.indices_offset = 0; }},
        BadCall{"overlap_lengths", TOPK_CHANNEL_OVERLAP,
                [](auto& d, const auto& l) { d.indices_offset = l.lengths_at; }}),
    [](const auto& info) { return std::string(info.param.what); });

TEST(Channel, BadLengthAndNanRowsAreRefusedWithTheirRow) {
  ChannelFixture f = ChannelFixture::Make();
  ASSERT_NE(f.channel, nullptr);
  int32_t* lengths = f.laid.segment.at<int32_t>(f.laid.lengths_at);
  const int32_t saved = lengths[3];
  lengths[3] = kWidth + 1;
  absl::Status status = f.channel->CallOnHost(f.Call(kRows));
  EXPECT_EQ(f.channel->control()->status, TOPK_CHANNEL_BAD_LENGTH) << status;
  EXPECT_EQ(f.channel->control()->status_row, 3);
  EXPECT_EQ(f.channel->control()->status_value, kWidth + 1);
  EXPECT_TRUE(f.OutputUntouched());
  lengths[3] = saved;
  const int64_t longest = std::max_element(lengths, lengths + kRows) - lengths;
  ASSERT_GT(lengths[longest], 2);
  f.laid.segment.at<float>(0)[longest * f.laid.pitch + 1] = std::nanf("");
  status = f.channel->CallOnHost(f.Call(kRows));
  EXPECT_EQ(f.channel->control()->status, TOPK_CHANNEL_NAN) << status;
  EXPECT_EQ(f.channel->control()->status_row, longest);
  EXPECT_TRUE(f.OutputUntouched());
}

TEST(Channel, OpenIsCheckedAndLimited) {
  ServerOptions options = RegionServerOptions();
  options.channels.max_channels_per_session = 2;
  ChannelFixture f = ChannelFixture::Make(options);
  ASSERT_NE(f.channel, nullptr);
  const client::ChannelOptions good{
      .k = kK, .max_rows = kRows, .max_width = kWidth, .regions = {"seg"}};
  auto second = client::Channel::Open(*f.session, good);
  ASSERT_TRUE(second.ok()) << second.status();
  auto third = client::Channel::Open(*f.session, good);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted) << third.status();
  second->reset();
  client::ChannelOptions bad = good;
  bad.regions = {"nope"};
  EXPECT_EQ(client::Channel::Open(*f.session, bad).status().code(), absl::StatusCode::kNotFound);
  bad.regions = {"seg", "seg"};
  EXPECT_EQ(client::Channel::Open(*f.session, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = good;
  bad.k = 1 << 30;
  EXPECT_EQ(client::Channel::Open(*f.session, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Each refusal names its field.
  const auto refused_naming = [&](const client::ChannelOptions& options, absl::string_view field) {
    const absl::Status s = client::Channel::Open(*f.session, options).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(field), absl::string_view::npos) << s;
  };
  bad = good;
  bad.max_rows = 0;
  refused_naming(bad, "max_rows");
  bad = good;
  bad.max_width = 0;
  refused_naming(bad, "max_width");
  bad = good;
  bad.regions = {};
  refused_naming(bad, "regions");
  bad = good;
  bad.dtype = static_cast<v1::ScoreType>(7);
  refused_naming(bad, "dtype");
  // Closing a channel the session does not hold.
  auto stub = v1::TopK::NewStub(f.session->grpc_channel());
  v1::CloseChannelRequest close;
  close.set_session_id(f.session->id());
  close.set_channel_id("ch999");
  v1::CloseChannelResponse closed;
  grpc::ClientContext context;
  EXPECT_EQ(stub->CloseChannel(&context, close, &closed).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST(Channel, EndsWithItsSession) {
  ChannelFixture f = ChannelFixture::Make();
  ASSERT_NE(f.channel, nullptr);
  ASSERT_TRUE(f.channel->CallOnHost(f.Call(kRows)).ok());
  // The control block exists while the channel is open...
  absl::StatusOr<v1::Stats> stats = f.server.client->GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->channels_open(), 1);
  f.session.reset();  // the client's session ends (as when it dies)
  for (int i = 0; i < 100; ++i) {
    stats = f.server.client->GetStats();
    if (stats.ok() && stats->channels_open() == 0) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->channels_open(), 0);
  // ...and a call into the released channel is answered as closed or not at all.
  const absl::Status late = f.channel->CallOnHost(f.Call(kRows), absl::Milliseconds(200));
  EXPECT_FALSE(late.ok());
}

TEST(Channel, RegionsDisabledMeansNoChannels) {
  TestServer t = StartServer(SmallOptions());
  absl::StatusOr<v1::ServerInfo> info = t.client->GetServerInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->channels_enabled());
  // OpenChannel on it says which flag serves it.
  auto stub = v1::TopK::NewStub(t.client->channel());
  v1::OpenChannelRequest open;
  v1::OpenChannelResponse opened;
  grpc::ClientContext context;
  const grpc::Status s = stub->OpenChannel(&context, open, &opened);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(s.error_message().find("--enable_regions"), std::string::npos) << s.error_message();
}

}  // namespace
}  // namespace topk::server::test
