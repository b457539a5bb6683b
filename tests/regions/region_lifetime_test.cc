// The regions' lifetime through the real server: a region unregistered (or
// its session ended) while a request reads it stays mapped until that
// request is done; a client process killed with regions registered loses
// them and nothing else; co-located clients reach the server over a unix
// socket; remote peers are refused.
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "support/fake_devices.h"
#include "support/regions.h"

extern char** environ;

namespace topk::server::test {
namespace {

using testing::Distribution;
using testing::LengthPattern;

// How many mappings of `shm_name` this process has (the in-process server's
// and the test's own).
int Mappings(const std::string& shm_name) {
  std::ifstream maps("/proc/self/maps");
  int count = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/dev/shm" + shm_name) != std::string::npos) ++count;
  }
  return count;
}

client::RegionRowsRef PitchedRef(const SegmentRows& laid, const tools::PackedRows& rows) {
  client::RegionRowsRef ref;
  ref.scores = {"seg", 0};
  ref.num_rows = static_cast<int32_t>(laid.num_rows);
  ref.row_pitch = laid.pitch;
  ref.lengths = rows.lengths;
  return ref;
}

enum class Release { kUnregister, kEndSession };

// One Select outside the session: unary, or on a pipeline of its own.
absl::StatusOr<client::SelectResult> SelectOn(client::CallPath path, client::Client& client,
                                              const v1::SelectRequest& request) {
  if (path == client::CallPath::kUnary) return client.Select(request);
  absl::StatusOr<std::unique_ptr<client::SelectPipeline>> pipeline =
      client::SelectPipeline::Open(client.channel());
  if (!pipeline.ok()) return pipeline.status();
  return (*pipeline)->Call(request);
}

void ReadsCompleteAfter(Release how, client::CallPath path) {
  absl::Notification entered, release;
  ServerOptions options = RegionServerOptions();
  options.backends.workers = 1;
  options.backends.device_factory = [&] {
    return std::make_unique<GatedDevice>(&entered, &release);
  };
  TestServer t = StartServer(options);
  auto session = client::RegionSession::Open(*t.client, path);
  ASSERT_TRUE(session.ok()) << session.status();
  const int32_t k = 50;
  const tools::PackedRows rows =
      Rows(Distribution::kIndexer, 6, 8000, LengthPattern::kRandom, 5, k);
  SegmentRows laid = LayOut(rows, RowLayout::kPitched, k);
  ASSERT_TRUE((*session)->Register("seg", laid.segment).ok());
  EXPECT_EQ(Mappings(laid.segment.name()), 2);  // ours and the server's

  const client::RegionRowsRef ref = PitchedRef(laid, rows);
  const client::RegionOutputRef out{.indices = {"seg", laid.indices_at}};
  // Ending the session: the answer comes in the reply, sent through a
  // client that is not the session (which is destroyed meanwhile).
  const bool end_session = how == Release::kEndSession;
  const v1::SelectRequest request =
      (*session)->MakeRequest(k, ref, end_session ? nullptr : &out, {});
  absl::StatusOr<client::SelectResult> result;
  std::thread caller([&] {
    result = end_session ? SelectOn(path, *t.client, request) : (*session)->Select(request);
  });
  entered.WaitForNotification();  // the request holds the region now

  if (end_session) {
    session->reset();  // the server drops the session's regions...
  } else {
    ASSERT_TRUE((*session)->Unregister("seg").ok());
    absl::StatusOr<std::vector<v1::RegionInfo>> listed = (*session)->List();
    ASSERT_TRUE(listed.ok());
    EXPECT_TRUE(listed->empty());
  }
  EXPECT_EQ(Mappings(laid.segment.name()), 2);  // ...but closes none in use
  release.Notify();
  caller.join();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(tools::Verify(rows, k, {}, end_session ? *result : ReadBack(laid, k, false)).ok());
  // Closed once the request is done (the reply may slightly precede it).
  for (int i = 0; i < 200 && Mappings(laid.segment.name()) != 1; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(Mappings(laid.segment.name()), 1);
  if (!end_session) {
    const absl::Status gone = (*session)->Select(request).status();
    EXPECT_EQ(gone.code(), absl::StatusCode::kNotFound) << gone;
  }
}

TEST(RegionLifetime, UnregisterWhileInFlightDefersTheClose) {
  ReadsCompleteAfter(Release::kUnregister, client::CallPath::kUnary);
}

TEST(RegionLifetime, SessionEndWhileInFlightDefersTheClose) {
  ReadsCompleteAfter(Release::kEndSession, client::CallPath::kUnary);
}

TEST(RegionLifetime, UnregisterWhileInFlightOnAPipelineDefersTheClose) {
  ReadsCompleteAfter(Release::kUnregister, client::CallPath::kStream);
}

TEST(RegionLifetime, SessionEndWhileInFlightOnAPipelineDefersTheClose) {
  ReadsCompleteAfter(Release::kEndSession, client::CallPath::kStream);
}

TEST(RegionLifetime, KilledClientLosesItsRegionsAndNothingElse) {
  TestServer t = StartServer(RegionServerOptions());
  // A session of this process, which must survive the other client's death.
  auto survivor = client::RegionSession::Open(*t.client);
  ASSERT_TRUE(survivor.ok());
  client::SharedMemorySegment mine = MakeSegment("mine", 4096);
  ASSERT_TRUE((*survivor)->Register("mine", mine).ok());

  const std::string shm_name = UniqueShmName("child");
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  // REGION_SESSION_CHILD in the environment: a relocated build's helper.
  const char* relocated = std::getenv("REGION_SESSION_CHILD");
  const std::string child = relocated != nullptr ? relocated : REGION_SESSION_CHILD;
  const std::string target = "--target=" + t.server->address();
  const std::string shm = "--shm_name=" + shm_name;
  char* argv[] = {const_cast<char*>(child.c_str()), const_cast<char*>(target.c_str()),
                  const_cast<char*>(shm.c_str()), nullptr};
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, child.c_str(), &actions, nullptr, argv, environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  std::string session_id;
  char c = 0;
  while (read(out[0], &c, 1) == 1 && c != '\n') session_id += c;
  close(out[0]);
  ASSERT_EQ(session_id.size(), 32u) << "the child did not report a session";

  absl::StatusOr<std::vector<v1::RegionInfo>> held = ListFor(*t.client, session_id);
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_EQ(held->size(), 1u);
  EXPECT_EQ(Mappings(shm_name), 1);  // the server's

  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(wstatus));

  absl::Status gone;
  for (int i = 0; i < 500; ++i) {
    gone = ListFor(*t.client, session_id).status();
    if (gone.code() == absl::StatusCode::kNotFound && Mappings(shm_name) == 0) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(gone.code(), absl::StatusCode::kNotFound) << gone;
  EXPECT_EQ(Mappings(shm_name), 0);  // the server unmapped it
  shm_unlink(shm_name.c_str());      // the killed child could not

  // Everything else goes on: the other session and plain selects.
  absl::StatusOr<std::vector<v1::RegionInfo>> still = (*survivor)->List();
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->size(), 1u);
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 5, 3000);
  absl::StatusOr<client::SelectResult> result = t.client->Select(32, rows.view());
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(tools::Verify(rows, 32, {}, *result).ok());
}

TEST(RegionTransport, UnixSocketAlongsideTcp) {
  ServerOptions options = RegionServerOptions();
  const std::string path = absl::StrCat("/tmp/topk-region-test-", getpid(), ".sock");
  options.listen = "127.0.0.1:0,unix:" + path;
  TestServer t = StartServer(options);
  ASSERT_NE(t.server, nullptr);
  auto local = client::Client::Connect({.target = "unix:" + path});
  ASSERT_TRUE(local.ok());
  auto session = client::RegionSession::Open(**local);
  ASSERT_TRUE(session.ok()) << session.status();
  const int32_t k = 40;
  const tools::PackedRows rows = Rows(Distribution::kFp8Ties, 7, 4000, LengthPattern::kEdges, 9, k);
  SegmentRows laid = LayOut(rows, RowLayout::kPackedOffsets, k);
  ASSERT_TRUE((*session)->Register("seg", laid.segment).ok());
  client::RegionRowsRef ref;
  ref.scores = {"seg", 0};
  ref.num_rows = static_cast<int32_t>(laid.num_rows);
  ref.row_offsets = client::RegionSlice{"seg", laid.offsets_at};
  ref.lengths_ref = client::RegionSlice{"seg", laid.lengths_at};
  const client::RegionOutputRef out{.indices = {"seg", laid.indices_at}};
  ASSERT_TRUE((*session)->Select(k, ref, &out, {.deterministic = true}).ok());
  EXPECT_TRUE(tools::Verify(rows, k, {.deterministic = true}, ReadBack(laid, k, false)).ok());
  // TCP still serves.
  absl::StatusOr<client::SelectResult> tcp = t.client->Select(k, rows.view());
  ASSERT_TRUE(tcp.ok());
  EXPECT_TRUE(tools::Verify(rows, k, {}, *tcp).ok());
}

// This host's first IPv4 address that is not loopback, or "".
std::string NonLoopbackIpv4() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    const uint32_t host = ntohl(in->sin_addr.s_addr);
    if ((host >> 24) == 127) continue;
    found =
        absl::StrCat(host >> 24, ".", (host >> 16) & 255, ".", (host >> 8) & 255, ".", host & 255);
  }
  freeifaddrs(list);
  return found;
}

TEST(RegionPeers, NonLocalPeerIsRefusedUnlessAllowed) {
  const std::string ip = NonLoopbackIpv4();
  if (ip.empty()) GTEST_SKIP() << "this host has no non-loopback IPv4 address to connect from";
  for (bool allow : {false, true}) {
    ServerOptions options = RegionServerOptions();
    options.listen = "0.0.0.0:0";
    options.regions.allow_remote = allow;
    TestServer t = StartServer(options);
    ASSERT_NE(t.server, nullptr);
    auto remote = client::Client::Connect({.target = absl::StrCat(ip, ":", t.server->port())});
    ASSERT_TRUE(remote.ok());
    auto session = client::RegionSession::Open(**remote);
    if (allow) {
      EXPECT_TRUE(session.ok()) << session.status();
    } else {
      ASSERT_FALSE(session.ok());
      EXPECT_EQ(session.status().code(), absl::StatusCode::kPermissionDenied) << session.status();
      EXPECT_NE(session.status().message().find("--regions_allow_remote"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace topk::server::test
