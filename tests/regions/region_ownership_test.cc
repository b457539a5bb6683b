// Proof of ownership for shared memory: the server maps an object only when
// the registering client wrote its session's proof into it (which only a
// process that can write the object can do), so naming an object the
// server can open but the client cannot gains the client nothing. The
// client library proves it and leaves the object's bytes as they were.
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "server/regions/shm_region.h"
#include "server/transport/region_service.h"
#include "support/regions.h"

namespace topk::server::test {
namespace {

class RegionOwnership : public ::testing::Test {
 protected:
  void SetUp() override {
    t_ = StartServer(RegionServerOptions());
    ASSERT_NE(t_.client, nullptr);
    auto session = client::RegionSession::Open(*t_.client);
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = *std::move(session);
    segment_ = MakeSegment("owned", 4096);
    // Not zeros: the bytes the proof replaces for a moment must come back.
    for (size_t i = 0; i < segment_.size(); ++i) segment_.data()[i] = std::byte(i * 7 + 3);
  }

  // The by-name form as an old client sends it: no proof written.
  absl::Status RegisterUnproven(const std::string& name, uint64_t offset, uint64_t bytes,
                                std::string shm_name = "") {
    v1::RegisterRegionRequest request;
    request.set_session_id(session_->id());
    request.set_name(name);
    request.mutable_shm()->set_shm_name(shm_name.empty() ? segment_.name() : shm_name);
    request.mutable_shm()->set_offset(offset);
    request.mutable_shm()->set_byte_size(bytes);
    return session_->Register(request);
  }

  void WriteAt(uint64_t at, const std::string& bytes) {
    std::memcpy(segment_.data() + at, bytes.data(), bytes.size());
  }

  std::vector<std::byte> Bytes() const {
    return std::vector<std::byte>(segment_.data(), segment_.data() + segment_.size());
  }

  TestServer t_;
  std::unique_ptr<client::RegionSession> session_;
  client::SharedMemorySegment segment_;
};

TEST_F(RegionOwnership, AnObjectWithoutTheProofIsRefused) {
  const std::vector<std::byte> before = Bytes();
  const absl::Status refused = RegisterUnproven("r", 64, 1024);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), segment_.name())) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "ownership proof at bytes [64, 80)")) << refused;
  EXPECT_EQ(Bytes(), before);
  absl::StatusOr<std::vector<v1::RegionInfo>> listed = session_->List();
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
}

TEST_F(RegionOwnership, TheProofOfTheSessionIsAccepted) {
  // Written by hand where the server looks for it: registered.
  WriteAt(64, ShmOwnershipProof(session_->id()));
  EXPECT_TRUE(RegisterUnproven("r", 64, 1024).ok());
  // Another session's proof proves nothing here.
  auto other = client::RegionSession::Open(*t_.client);
  ASSERT_TRUE(other.ok());
  WriteAt(128, ShmOwnershipProof((*other)->id()));
  const absl::Status refused = RegisterUnproven("s", 128, 1024);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
}

TEST_F(RegionOwnership, TheClientProvesItAndRestoresTheBytes) {
  const std::vector<std::byte> before = Bytes();
  ASSERT_TRUE(session_->Register("whole", segment_).ok());
  ASSERT_TRUE(session_->RegisterShm("middle", segment_.name(), 1000, 500).ok());
  // A range whose 16 bytes do not fit from its offset: the proof goes in the
  // object's last 16.
  ASSERT_TRUE(session_->RegisterShm("tail", segment_.name(), 4090, 6).ok());
  EXPECT_EQ(Bytes(), before);
  EXPECT_EQ(RegisterUnproven("tail-unproven", 4090, 6).code(), absl::StatusCode::kPermissionDenied);
  absl::StatusOr<std::vector<v1::RegionInfo>> listed = session_->List();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 3u);
}

TEST_F(RegionOwnership, AnObjectTooSmallForTheProofIsRefused) {
  client::SharedMemorySegment tiny = MakeSegment("tiny", 8);
  const absl::Status refused = session_->RegisterShm("tiny", tiny.name(), 0, 8);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "smaller than the 16-byte ownership proof"))
      << refused;
}

// shm_open() stops at a NUL byte: "/<segment>\0cd" would open the segment
// (which holds this session's proof, so the registration would pass) while
// the server reports and lists another name. Refused before any open.
TEST_F(RegionOwnership, ANameWithANulByteIsRefused) {
  WriteAt(64, ShmOwnershipProof(session_->id()));
  const std::vector<std::byte> before = Bytes();
  const std::string with_nul = segment_.name() + std::string("\0cd", 3);
  ASSERT_EQ(with_nul.size(), segment_.name().size() + 3);
  const absl::Status refused = RegisterUnproven("r", 64, 1024, with_nul);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "shm.shm_name")) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), segment_.name() + "\\x00")) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "NUL")) << refused;
  EXPECT_EQ(Bytes(), before);
  absl::StatusOr<std::vector<v1::RegionInfo>> listed = session_->List();
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
  // The same name without the NUL tail, with the proof in place: accepted
  // (the refusal above was the NUL's, not the object's).
  EXPECT_TRUE(RegisterUnproven("r", 64, 1024).ok());
}

// "/." and "/.." pass the one-slash rule but name directories.
TEST_F(RegionOwnership, DotNamesAreRefused) {
  for (const std::string name : {"/.", "/.."}) {
    const absl::Status refused = RegisterUnproven("r", 0, 16, name);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
    EXPECT_TRUE(absl::StrContains(refused.message(), "shm.shm_name")) << refused;
  }
}

}  // namespace
}  // namespace topk::server::test
