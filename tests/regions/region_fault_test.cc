// Every malformed reference through the real server: the request fails with
// the documented code and a message naming the field (and the row), before
// any selection runs; and the server goes on answering correctly after it.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <limits>

#include "gtest/gtest.h"
#include "server/transport/region_service.h"
#include "support/regions.h"

namespace topk::server::test {
namespace {

using testing::Distribution;
using testing::LengthPattern;

constexpr int32_t kK = 16;

// Every case on both call paths: a SelectPipeline stream (the session's
// default) answers each malformed request as unary Select does, and goes on.
class RegionFaults : public ::testing::TestWithParam<client::CallPath> {
 protected:
  void SetUp() override {
    t_ = StartServer(RegionServerOptions());
    ASSERT_NE(t_.client, nullptr);
    auto session = client::RegionSession::Open(*t_.client, GetParam());
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = *std::move(session);
    rows_ = Rows(Distribution::kIndexer, 4, 1000, LengthPattern::kRandom, 3, kK);
    laid_ = LayOut(rows_, RowLayout::kPitched, kK);
    ASSERT_TRUE(session_->Register("seg", laid_.segment).ok());
  }

  // A valid request; each test breaks one thing in it.
  v1::SelectRequest Valid(bool with_output = true) const {
    client::RegionRowsRef ref;
    ref.scores = {"seg", 0};
    ref.num_rows = static_cast<int32_t>(laid_.num_rows);
    ref.row_pitch = laid_.pitch;
    ref.lengths = rows_.lengths;
    const client::RegionOutputRef out{.indices = {"seg", laid_.indices_at}};
    return session_->MakeRequest(kK, ref, with_output ? &out : nullptr, {});
  }

  // Fails with `code` and a message containing `field`; and a valid request
  // still gets an exact answer afterwards.
  void ExpectRefused(const v1::SelectRequest& request, absl::StatusCode code,
                     const std::string& field) {
    absl::StatusOr<client::SelectResult> result = session_->Select(request);
    ASSERT_FALSE(result.ok()) << field;
    EXPECT_EQ(result.status().code(), code) << result.status();
    EXPECT_NE(result.status().message().find(field), std::string::npos) << result.status();
    ASSERT_TRUE(session_->Select(Valid()).ok());
    EXPECT_TRUE(tools::Verify(rows_, kK, {}, ReadBack(laid_, kK, false)).ok());
  }

  TestServer t_;
  std::unique_ptr<client::RegionSession> session_;
  tools::PackedRows rows_;
  SegmentRows laid_;
};

TEST_P(RegionFaults, UnknownRegionAndSession) {
  v1::SelectRequest request = Valid();
  request.mutable_region_rows()->mutable_scores()->set_region("nope");
  ExpectRefused(request, absl::StatusCode::kNotFound, "region_rows.scores.region");
  request = Valid();
  request.mutable_output()->mutable_indices()->set_region("nope");
  ExpectRefused(request, absl::StatusCode::kNotFound, "output.indices.region");
  request = Valid();
  request.set_session_id("0123456789abcdef0123456789abcdef");
  ExpectRefused(request, absl::StatusCode::kNotFound, "session_id");
  request = Valid();
  request.clear_session_id();
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "session_id");
}

TEST_P(RegionFaults, OffsetsAndExtentsPastTheEnd) {
  const uint64_t size = laid_.segment.size();
  v1::SelectRequest request = Valid();
  request.mutable_region_rows()->mutable_scores()->set_offset(size + 4);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "region_rows.scores.offset");
  // In range, but the rows then run past the end.
  request = Valid();
  request.mutable_region_rows()->mutable_scores()->set_offset(size - 64);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "runs past");
  request = Valid();
  request.mutable_region_rows()->set_row_pitch(int64_t{1} << 40);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "region_rows: row 1");
  request = Valid();
  request.mutable_output()->mutable_indices()->set_offset(size - 8);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "output.indices");
  request = Valid();
  request.mutable_region_rows()->clear_lengths();
  request.mutable_region_rows()->mutable_lengths_ref()->set_region("seg");
  request.mutable_region_rows()->mutable_lengths_ref()->set_offset(size - 4);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "region_rows.lengths_ref");
}

TEST_P(RegionFaults, OverflowingArithmetic) {
  const uint64_t max64 = std::numeric_limits<uint64_t>::max();
  v1::SelectRequest request = Valid();
  request.mutable_region_rows()->mutable_scores()->set_offset(max64 - 3);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "region_rows.scores.offset");
  request = Valid();
  request.mutable_region_rows()->set_row_pitch(std::numeric_limits<int64_t>::max());
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "region_rows: row 1");
  request = Valid();
  request.mutable_output()->set_row_stride(std::numeric_limits<int64_t>::max());
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "output.indices");
  // 3 x this stride is 2^64 + 2: in 64 bits the output would seem to need 2 + k
  // elements and row 1 would be written far outside the region.
  request = Valid();
  request.mutable_output()->set_row_stride(int64_t{0x5555555555555556});
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "output.indices");
  // Packed offsets that would wrap: written into the segment, read by the server.
  int64_t* offsets = laid_.segment.at<int64_t>(laid_.offsets_at);
  offsets[0] = 0;
  offsets[1] = std::numeric_limits<int64_t>::max() - 2;
  offsets[2] = -8;
  offsets[3] = 0;
  request = Valid();
  request.mutable_region_rows()->mutable_row_offsets()->set_region("seg");
  request.mutable_region_rows()->mutable_row_offsets()->set_offset(laid_.offsets_at);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "region_rows.row_offsets[1]");
  // Registration: offset + size wraps.
  const absl::Status wraps = session_->RegisterShm("w", laid_.segment.name(), max64 - 10, 100);
  EXPECT_EQ(wraps.code(), absl::StatusCode::kInvalidArgument) << wraps;
  EXPECT_NE(wraps.message().find("overflows"), std::string::npos) << wraps;
}

TEST_P(RegionFaults, Misalignment) {
  v1::SelectRequest request = Valid();
  request.mutable_region_rows()->mutable_scores()->set_offset(2);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "aligned");
  request = Valid();
  request.mutable_region_rows()->mutable_row_offsets()->set_region("seg");
  request.mutable_region_rows()->mutable_row_offsets()->set_offset(laid_.offsets_at + 4);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "region_rows.row_offsets.offset");
  request = Valid();
  request.mutable_output()->mutable_indices()->set_offset(laid_.indices_at + 1);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "output.indices.offset");
}

TEST_P(RegionFaults, BadShapesAndLengths) {
  v1::SelectRequest request = Valid();
  request.mutable_region_rows()->set_lengths(2, -1);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "region_rows.lengths[2]");
  request = Valid();
  request.mutable_region_rows()->set_lengths(3, 1 << 20);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "region_rows.lengths[3]");
  request = Valid();
  request.mutable_region_rows()->add_lengths(5);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "region_rows.lengths");
  request = Valid();
  request.mutable_region_rows()->mutable_lengths_ref()->set_region("seg");
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "either inline");
  request = Valid();
  request.mutable_region_rows()->clear_layout();
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "row_pitch or row_offsets");
  request = Valid();
  request.mutable_region_rows()->set_row_pitch(3);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "region_rows.row_pitch");
  request = Valid();
  request.mutable_region_rows()->set_num_rows(0);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "region_rows.num_rows");
  request = Valid();
  request.mutable_region_rows()->set_num_rows(100000);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "max_rows");
  request = Valid();
  request.mutable_region_rows()->set_width(-2);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "region_rows.width");
  request = Valid();
  request.set_k(100000);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "max_k");
  request = Valid();
  request.mutable_output()->set_row_stride(kK - 1);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "output.row_stride");
  request = Valid();
  request.mutable_options()->set_return_values(true);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "output.values");
}

TEST_P(RegionFaults, WrongDevice) {
  // GPU memory on a server that selects on the CPU.
  const std::string handle(kCudaIpcHandleBytes, '\x01');
  const absl::Status gpu =
      session_->RegisterCudaIpc("gpu", handle, 0, 4096, {.uuid = "GPU-not-here"});
  if (TestBackend() == "cpu") {
    EXPECT_EQ(gpu.code(), absl::StatusCode::kInvalidArgument) << gpu;
    EXPECT_NE(gpu.message().find("wrong device"), std::string::npos) << gpu;
  } else {
    EXPECT_EQ(gpu.code(), absl::StatusCode::kInvalidArgument) << gpu;
    EXPECT_NE(gpu.message().find("cuda_ipc.device.uuid"), std::string::npos) << gpu;
  }
  // GPU-side ordering for host memory.
  v1::SelectRequest request = Valid();
  request.mutable_ordering()->set_wait_event("seg");
  ExpectRefused(request, absl::StatusCode::kInvalidArgument, "ordering");
}

TEST_P(RegionFaults, BadHandlesAndNames) {
  for (size_t bytes : {size_t{0}, size_t{63}, size_t{65}}) {
    const absl::Status memory =
        session_->RegisterCudaIpc("h", std::string(bytes, '\x02'), 0, 64, {.ordinal = 0});
    EXPECT_EQ(memory.code(), absl::StatusCode::kInvalidArgument) << memory;
    EXPECT_NE(memory.message().find("cuda_ipc.ipc_handle"), std::string::npos) << memory;
    const absl::Status event =
        session_->RegisterCudaEvent("e", std::string(bytes, '\x02'), {.ordinal = 0});
    EXPECT_EQ(event.code(), absl::StatusCode::kInvalidArgument) << event;
    EXPECT_NE(event.message().find("cuda_event.ipc_event_handle"), std::string::npos) << event;
  }
  const absl::Status missing = session_->RegisterShm("m", UniqueShmName("missing"), 0, 64);
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument) << missing;
  EXPECT_NE(missing.message().find("No such file"), std::string::npos) << missing;
  const absl::Status path = session_->RegisterShm("p", "/etc/passwd", 0, 64);
  EXPECT_EQ(path.code(), absl::StatusCode::kInvalidArgument) << path;
  const absl::Status too_big =
      session_->RegisterShm("b", laid_.segment.name(), 0, laid_.segment.size() + 1);
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument) << too_big;
  EXPECT_NE(too_big.message().find("exceeds"), std::string::npos) << too_big;
  EXPECT_EQ(session_->RegisterShm("", laid_.segment.name(), 0, 64).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session_->RegisterShm(std::string(200, 'n'), laid_.segment.name(), 0, 64).code(),
            absl::StatusCode::kInvalidArgument);
  v1::RegisterRegionRequest no_kind;
  no_kind.set_session_id(session_->id());
  no_kind.set_name("k");
  EXPECT_EQ(session_->Register(no_kind).code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::vector<v1::RegionInfo>> listed = session_->List();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 1u);  // nothing above was registered
}

TEST_P(RegionFaults, ShrunkSharedMemoryIsRefused) {
  // The owner truncates the object after registering it: reading the lost
  // range would fault, so requests are refused instead.
  const int fd = shm_open(laid_.segment.name().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  close(fd);
  absl::StatusOr<client::SelectResult> result = session_->Select(Valid());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition) << result.status();
  EXPECT_NE(result.status().message().find("shrank"), std::string::npos) << result.status();
}

INSTANTIATE_TEST_SUITE_P(CallPaths, RegionFaults,
                         ::testing::Values(client::CallPath::kUnary, client::CallPath::kStream),
                         [](const ::testing::TestParamInfo<client::CallPath>& info) {
                           return info.param == client::CallPath::kUnary ? "Unary" : "Stream";
                         });

TEST(RegionFlag, OffByDefault) {
  TestServer t = StartServer();
  absl::StatusOr<std::unique_ptr<client::RegionSession>> session =
      client::RegionSession::Open(*t.client);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), absl::StatusCode::kUnimplemented) << session.status();
  EXPECT_NE(session.status().message().find("--enable_regions"), std::string::npos);
  // A Select naming regions is refused the same way, and inline still works.
  v1::SelectRequest request;
  request.set_k(4);
  request.set_session_id("x");
  request.mutable_region_rows()->set_num_rows(1);
  request.mutable_region_rows()->set_row_pitch(8);
  request.mutable_region_rows()->add_lengths(8);
  request.mutable_region_rows()->mutable_scores()->set_region("r");
  absl::StatusOr<client::SelectResult> refused = t.client->Select(request);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnimplemented) << refused.status();
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 3, 500);
  absl::StatusOr<client::SelectResult> ok = t.client->Select(8, rows.view());
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(tools::Verify(rows, 8, {}, *ok).ok());
}

TEST(RegionPeers, LoopbackAndUnixSocketsAreLocal) {
  EXPECT_TRUE(IsLocalPeer("ipv4:127.0.0.1:4242"));
  EXPECT_TRUE(IsLocalPeer("ipv4:127.8.9.10:1"));
  EXPECT_TRUE(IsLocalPeer("ipv6:[::1]:4242"));
  EXPECT_TRUE(IsLocalPeer("ipv6:[::ffff:127.0.0.1]:4242"));
  EXPECT_TRUE(IsLocalPeer("unix:/run/topk.sock"));
  EXPECT_TRUE(IsLocalPeer("unix-abstract:topk"));
  EXPECT_FALSE(IsLocalPeer("ipv4:10.0.0.5:4242"));
  EXPECT_FALSE(IsLocalPeer("ipv4:128.0.0.1:4242"));
  EXPECT_FALSE(IsLocalPeer("ipv6:[2001:db8::1]:4242"));
  EXPECT_FALSE(IsLocalPeer("ipv6:[::ffff:10.0.0.5]:4242"));
  EXPECT_FALSE(IsLocalPeer(""));
}

}  // namespace
}  // namespace topk::server::test
