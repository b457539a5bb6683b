// A client that shrinks its shared-memory object while the server reads it:
// the read faults (SIGBUS), the guard maps zero pages over the region and
// poisons it, the request that was reading fails with DATA_LOSS naming the
// region, later requests on it are refused, and the server keeps serving
// everyone else. A fault outside any guarded mapping still ends the process.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "server/backends/row_source.h"
#include "server/regions/region.h"
#include "server/regions/shm_guard.h"
#include "server/regions/shm_region.h"
#include "support/fake_devices.h"
#include "support/regions.h"

namespace topk::server::test {
namespace {

using testing::Distribution;
using testing::LengthPattern;

// OpenShmRegion as a registration calls it: with an ownership proof the
// object holds for the moment (written where the server looks, the bytes it
// replaced put back once the region is open).
absl::StatusOr<std::unique_ptr<Region>> OpenProven(const std::string& shm_name, uint64_t offset,
                                                   uint64_t byte_size) {
  const std::string proof(kShmProofBytes, 'p');
  const int fd = shm_open(shm_name.c_str(), O_RDWR, 0);
  struct stat info {};
  if (fd < 0 || fstat(fd, &info) != 0) return absl::InternalError("cannot open " + shm_name);
  const int64_t at = ShmProofOffset(offset, static_cast<uint64_t>(info.st_size));
  char saved[kShmProofBytes] = {};
  const bool written = at >= 0 && pread(fd, saved, kShmProofBytes, at) == kShmProofBytes &&
                       pwrite(fd, proof.data(), kShmProofBytes, at) == kShmProofBytes;
  absl::StatusOr<std::unique_ptr<Region>> region =
      OpenShmRegion(shm_name, offset, byte_size, proof);
  if (written) {
    EXPECT_EQ(pwrite(fd, saved, kShmProofBytes, at), kShmProofBytes);
  }
  close(fd);
  return region;
}

void Shrink(const std::string& shm_name) {
  const int fd = shm_open(shm_name.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 0), 0);
  close(fd);
}

TEST(ShmGuard, AFaultInAGuardedMappingReadsZerosAndPoisonsIt) {
  const std::string name = UniqueShmName("guard");
  const size_t bytes = 3 * 4096 + 100;
  absl::StatusOr<client::SharedMemorySegment> segment =
      client::SharedMemorySegment::Create(name, bytes);
  ASSERT_TRUE(segment.ok()) << segment.status();
  for (size_t i = 0; i < bytes; ++i) segment->data()[i] = std::byte{0x5a};
  absl::StatusOr<std::unique_ptr<Region>> region = OpenProven(name, 4096, bytes - 4096);
  ASSERT_TRUE(region.ok()) << region.status();
  std::vector<std::byte> copy(bytes - 4096);
  ASSERT_TRUE(CopyFromRegion(**region, 0, copy.size(), copy.data()).ok());
  EXPECT_EQ(copy.back(), std::byte{0x5a});
  EXPECT_FALSE((*region)->poisoned());

  Shrink(name);
  // The copy faults; the guard maps zeros and the copy completes.
  ASSERT_TRUE(CopyFromRegion(**region, 0, copy.size(), copy.data()).ok());
  EXPECT_TRUE((*region)->poisoned());
  EXPECT_EQ(copy.front(), std::byte{0});
  EXPECT_EQ(copy.back(), std::byte{0});
  const absl::Status intact = (*region)->CheckIntact();
  EXPECT_EQ(intact.code(), absl::StatusCode::kFailedPrecondition) << intact;
  EXPECT_TRUE(absl::StrContains(intact.message(), "poisoned")) << intact;
}

// The CUDA backend's staging copy (streaming stores, several threads at
// once) over a region shrunk under it: every thread's faults are repaired,
// the copies complete with zeros where the lost pages were, and the region
// is poisoned.
TEST(ShmGuard, StreamingCopiesOnSeveralThreadsOfAShrunkRegionReadZeros) {
  const std::string name = UniqueShmName("stream");
  const size_t bytes = size_t{4} << 20;
  absl::StatusOr<client::SharedMemorySegment> segment =
      client::SharedMemorySegment::Create(name, bytes);
  ASSERT_TRUE(segment.ok()) << segment.status();
  for (size_t i = 0; i < bytes; ++i) segment->data()[i] = std::byte{0x5a};
  absl::StatusOr<std::unique_ptr<Region>> region = OpenProven(name, 0, bytes);
  ASSERT_TRUE(region.ok()) << region.status();
  const RegionRows rows((*region)->data(), bytes, -1);
  Shrink(name);
  constexpr int kThreads = 4;
  constexpr size_t kChunk = size_t{64} << 10;
  std::vector<std::vector<std::byte>> copies(kThreads, std::vector<std::byte>(bytes / kThreads));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const size_t first = t * (bytes / kThreads);
      for (size_t at = 0; at < bytes / kThreads; at += kChunk) {
        // Unaligned by one byte: the head, the body and the tail each fault.
        const size_t from = at == 0 ? 0 : at - 1;
        rows.CopyRange(first + from, kChunk, copies[t].data() + from, CopyStores::kStreaming);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_TRUE((*region)->poisoned());
  for (int t = 0; t < kThreads; ++t) {
    for (size_t i = 0; i < copies[t].size(); i += 4093) {
      ASSERT_EQ(copies[t][i], std::byte{0}) << "thread " << t << " byte " << i;
    }
  }
}

TEST(ShmGuard, AFaultElsewhereStillEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Guard something first, so the handler is installed and has to chain.
  const std::string guarded = UniqueShmName("guarded");
  absl::StatusOr<client::SharedMemorySegment> segment =
      client::SharedMemorySegment::Create(guarded, 4096);
  ASSERT_TRUE(segment.ok());
  absl::StatusOr<std::unique_ptr<Region>> region = OpenProven(guarded, 0, 4096);
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_EXIT(
      {
        const std::string name = UniqueShmName("unguarded");
        const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd < 0 || ftruncate(fd, 4096) != 0) std::_Exit(2);
        auto* bytes = static_cast<volatile char*>(
            mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
        shm_unlink(name.c_str());
        if (ftruncate(fd, 0) != 0) std::_Exit(3);
        (void)bytes[0];  // SIGBUS, in no guarded mapping
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

client::RegionRowsRef Pitched(const SegmentRows& laid, const tools::PackedRows& rows,
                              const std::string& region) {
  client::RegionRowsRef ref;
  ref.scores = {region, 0};
  ref.num_rows = static_cast<int32_t>(laid.num_rows);
  ref.row_pitch = laid.pitch;
  ref.lengths = rows.lengths;
  return ref;
}

// Deterministic: the request is inside the device when the object shrinks.
TEST(ShmGuard, ARequestReadingAShrunkObjectFailsAndTheServerGoesOn) {
  absl::Notification entered, release;
  ServerOptions options = RegionServerOptions();
  options.backends.workers = 1;
  options.backends.device_factory = [&] {
    return std::make_unique<GatedDevice>(&entered, &release);
  };
  TestServer t = StartServer(options);
  auto victim = client::RegionSession::Open(*t.client);
  auto other = client::RegionSession::Open(*t.client);
  ASSERT_TRUE(victim.ok() && other.ok());
  const int32_t k = 32;
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 4, 20000, LengthPattern::kFull, 2, k);
  SegmentRows shrinking = LayOut(rows, RowLayout::kPitched, k);
  SegmentRows intact = LayOut(rows, RowLayout::kPitched, k);
  ASSERT_TRUE((*victim)->Register("seg", shrinking.segment).ok());
  ASSERT_TRUE((*other)->Register("seg", intact.segment).ok());

  // The answer travels in the reply: the test's own mapping of the shrunk
  // object would fault too.
  const v1::SelectRequest request =
      (*victim)->MakeRequest(k, Pitched(shrinking, rows, "seg"), nullptr, {});
  absl::StatusOr<client::SelectResult> result;
  std::thread caller([&] { result = (*victim)->Select(request); });
  entered.WaitForNotification();
  Shrink(shrinking.segment.name());
  release.Notify();
  caller.join();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss) << result.status();
  EXPECT_TRUE(absl::StrContains(result.status().message(), "region 'seg'")) << result.status();

  // Later requests on the region are refused, naming it.
  const absl::Status refused = (*victim)->Select(request).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "region_rows.scores.region: 'seg'")) << refused;
  // Everyone else is served, exactly.
  const client::RegionOutputRef out{.indices = {"seg", intact.indices_at}};
  absl::StatusOr<client::SelectResult> fine =
      (*other)->Select(k, Pitched(intact, rows, "seg"), &out);
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_TRUE(tools::Verify(rows, k, {}, ReadBack(intact, k, false)).ok());
  // The poisoned region unregisters like any other.
  EXPECT_TRUE((*victim)->Unregister("seg").ok());
}

// A thread shrinks the object during a loop of long reads: some request
// faults or is refused, none is answered wrong, and the server survives.
TEST(ShmGuard, ShrinkingDuringALoadLoopNeverAnswersWrong) {
  TestServer t = StartServer(RegionServerOptions());
  auto session = client::RegionSession::Open(*t.client);
  ASSERT_TRUE(session.ok());
  const int32_t k = 64;
  const tools::PackedRows rows =
      Rows(Distribution::kIndexer, 16, 60000, LengthPattern::kFull, 4, k);
  SegmentRows laid = LayOut(rows, RowLayout::kPitched, k);
  ASSERT_TRUE((*session)->Register("seg", laid.segment).ok());
  const v1::SelectRequest request =
      (*session)->MakeRequest(k, Pitched(laid, rows, "seg"), nullptr, {});
  std::atomic<int> answered{0};
  std::thread shrinker([&] {
    while (answered.load() < 3) absl::SleepFor(absl::Milliseconds(1));
    Shrink(laid.segment.name());
  });
  int ok = 0;
  int failed = 0;
  for (int i = 0; i < 400 && failed < 3; ++i) {
    absl::StatusOr<client::SelectResult> result = (*session)->Select(request);
    answered.fetch_add(1);
    if (result.ok()) {
      ++ok;
      // Read before the shrink: exact.
      ASSERT_TRUE(tools::Verify(rows, k, {}, *result).ok()) << "call " << i;
      continue;
    }
    ++failed;
    const absl::StatusCode code = result.status().code();
    EXPECT_TRUE(code == absl::StatusCode::kDataLoss ||
                code == absl::StatusCode::kFailedPrecondition)
        << result.status();
    EXPECT_TRUE(absl::StrContains(result.status().message(), "'seg'")) << result.status();
  }
  shrinker.join();
  EXPECT_GE(ok, 3);
  EXPECT_EQ(failed, 3);
  // Inline requests are still served.
  absl::StatusOr<client::SelectResult> inline_result = t.client->Select(k, rows.view());
  ASSERT_TRUE(inline_result.ok()) << inline_result.status();
  EXPECT_TRUE(tools::Verify(rows, k, {}, *inline_result).ok());
}

}  // namespace
}  // namespace topk::server::test
