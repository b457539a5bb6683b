// Limits that fit each path (issue 20): the byte limits bound what the server
// copies or holds, not rows that stay in the client's memory. Rows by
// reference (shared memory, read in place by the CPU backend) pass
// max_batch_bytes; the same rows inline are refused naming it; the default
// limits start and serve a 2048-row prefill batch by reference.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "server/backends/row_source.h"
#include "server/engine/coalescing.h"
#include "server/regions/region_binding.h"
#include "server/transport/validate.h"
#include "support/fake_devices.h"
#include "support/regions.h"

namespace topk::server::test {
namespace {

using testing::Distribution;
using testing::LengthPattern;

// Rows by reference with the answer in the response.
absl::StatusOr<client::SelectResult> SelectByReference(client::RegionSession& session,
                                                       const SegmentRows& laid,
                                                       const tools::PackedRows& rows, int32_t k) {
  client::RegionRowsRef ref;
  ref.scores = {"seg", 0};
  ref.num_rows = static_cast<int32_t>(laid.num_rows);
  ref.row_pitch = laid.pitch;
  ref.lengths = rows.lengths;
  return session.Select(k, ref, nullptr, {});
}

ServerOptions SmallBatchBytes() {
  ServerOptions options = RegionServerOptions();
  options.engine.limits.max_batch_bytes = 64 << 10;  // the rows below are 2-3x this
  options.calls.max_inflight_bytes = 0;              // no bound: only max_batch_bytes refuses
  return options;
}

// Rows the CPU backend reads in place, four times --max_batch_bytes: served.
TEST(Limits, RowsByReferenceReadInPlacePassMaxBatchBytes) {
  TestServer t = StartServer(SmallBatchBytes());
  ASSERT_NE(t.client, nullptr);
  ASSERT_TRUE(t.server->engine().reads_host_rows_in_place());
  auto session = client::RegionSession::Open(*t.client);
  ASSERT_TRUE(session.ok()) << session.status();
  const int32_t k = 32;
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 16, 3000, LengthPattern::kRandom, 5);
  SegmentRows laid = LayOut(rows, RowLayout::kPitched, k);
  ASSERT_GT(laid.num_rows * laid.pitch * 4, int64_t{64} << 10);
  ASSERT_TRUE((*session)->Register("seg", laid.segment).ok());
  absl::StatusOr<client::SelectResult> result = SelectByReference(**session, laid, rows, k);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(tools::Verify(rows, k, {}, *result).ok());
}

TEST(Limits, InlineRowsOfTheSameSizeAreRefusedNamingMaxBatchBytes) {
  TestServer t = StartServer(SmallBatchBytes());
  ASSERT_NE(t.client, nullptr);
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 16, 3000, LengthPattern::kRandom, 5);
  ASSERT_GT(rows.scores.size() * 4, size_t{64} << 10);
  const absl::Status refused = t.client->Select(32, rows.view(), {}).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "max_batch_bytes")) << refused;
}

TEST(Limits, RegionRowBytesCountOnlyWhenCopied) {
  const RequestLimits limits{.max_batch_bytes = 1000};
  alignas(4) std::byte host[2004] = {};
  const RegionRows aligned(host, 2000, -1), misaligned(host + 2, 2000, -1);
  const RegionRows small(host, 1000, -1), on_gpu(host, 2000, 0);
  ASSERT_NE(aligned.InPlaceHostFloats(), nullptr);
  ASSERT_EQ(misaligned.InPlaceHostFloats(), nullptr);
  // The CPU backend reads aligned host rows in place; GPU rows are read on their GPU.
  EXPECT_TRUE(CheckRegionRowBytes(aligned, true, limits).ok());
  EXPECT_TRUE(CheckRegionRowBytes(on_gpu, false, limits).ok());
  EXPECT_TRUE(CheckRegionRowBytes(small, false, limits).ok());
  // Copied: by a GPU backend, or a CPU one when the rows are off alignment.
  for (const absl::Status& copied : {CheckRegionRowBytes(aligned, false, limits),
                                     CheckRegionRowBytes(misaligned, true, limits)}) {
    EXPECT_EQ(copied.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(copied.message(), "2000 bytes, over max_batch_bytes = 1000"))
        << copied;
  }
}

// A lone job whose in-place rows span more than max_batch_bytes takes no
// batch-mate: a batch of several parts may be copied whole into staging.
TEST(Limits, InPlaceJobBeyondMaxBatchBytesIsServedAlone) {
  const RequestLimits limits{.max_k = 8, .max_rows = 64, .max_batch_bytes = 4096};
  std::vector<float> big(2048, 1.5f), small(16, 2.5f);
  const RegionRows big_rows(reinterpret_cast<const std::byte*>(big.data()), big.size() * 4, -1);
  const RegionRows small_rows(reinterpret_cast<const std::byte*>(small.data()), small.size() * 4,
                              -1);
  const std::vector<int32_t> big_lengths = {2048}, small_lengths = {16};
  const SelectInput lead{.k = 8, .lengths = big_lengths, .rows = &big_rows, .max_length = 2048};
  const SelectInput mate{.k = 8, .lengths = small_lengths, .rows = &small_rows, .max_length = 16};
  BatchFootprint batch;
  Add(lead, batch);
  EXPECT_FALSE(CanJoin(lead, mate, batch, limits, 8));
  // Two small ones do share a call (the check above is not vacuous).
  BatchFootprint smalls;
  Add(mate, smalls);
  EXPECT_TRUE(CanJoin(mate, mate, smalls, limits, 8));
}

// The same through an engine on the CPU selector (below the transport):
// a queued in-place job beyond max_batch_bytes among small jobs that must be
// staged is served alone and exactly, the small ones together.
TEST(Limits, InPlaceJobBeyondMaxBatchBytesRunsAloneOnTheCpu) {
  DeviceLog log;
  std::vector<std::unique_ptr<Device>> devices;
  devices.push_back(std::make_unique<FakeDevice>(0, &log));
  RequestLimits limits = SmallLimits();
  limits.max_batch_bytes = 64 << 10;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(
      {.queue_depth = 64, .max_queue_delay_us = 1000, .limits = limits},
      Backends{.name = "fake", .workers_per_device = 1, .devices = std::move(devices)});
  ASSERT_TRUE(engine.ok()) << engine.status();
  log.Close();
  TestJob blocker(Rows(Distribution::kIndexer, 1, 3000, LengthPattern::kFull, 1, 8), 8);
  (*engine)->Submit(&blocker);
  ASSERT_TRUE(log.WaitEntered(1));
  auto make = [](int64_t rows, uint64_t seed, Held held) {
    return std::make_unique<TestJob>(
        Rows(Distribution::kIndexer, rows, 3000, LengthPattern::kFull, seed, 64), 64, false, -1,
        held);
  };
  std::vector<std::unique_ptr<TestJob>> jobs;
  jobs.push_back(make(1, 20, Held::kStaged));
  jobs.push_back(make(8, 21, Held::kInPlace));  // 96 KB: over max_batch_bytes
  jobs.push_back(make(2, 22, Held::kStaged));
  ASSERT_TRUE(jobs[1]->in_place());
  for (auto& job : jobs) (*engine)->Submit(job.get());
  log.Open();
  for (auto& job : jobs) ASSERT_TRUE(job->WaitDone());
  ASSERT_TRUE(blocker.WaitDone());
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(jobs[i]->Exact().ok()) << i << ": " << jobs[i]->Exact();
  }
  EXPECT_EQ(jobs[1]->timings().batch_requests, 1);
  EXPECT_EQ(jobs[0]->timings().batch_requests, 2);  // the small ones share a call
  EXPECT_EQ(jobs[2]->timings().batch_requests, 2);
}

ServerOptions DefaultLimits() {
  ServerOptions options;  // the product's defaults, but for where it listens
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "";
  options.backends.backend = "cpu";
  options.regions.enabled = true;
  return options;
}

TEST(Limits, DefaultsPassTheStartupChecks) {
  const ServerOptions options;
  EXPECT_EQ(options.engine.limits.max_rows, 8192);
  EXPECT_TRUE(ValidateServerOptions(options).ok()) << ValidateServerOptions(options);
  // The response check is still there: it is the defaults that satisfy it.
  ServerOptions small_send = options;
  small_send.max_send_message_bytes =
      options.engine.limits.max_rows * options.engine.limits.max_k * 4;
  const absl::Status refused = ValidateServerOptions(small_send);
  EXPECT_TRUE(absl::StrContains(refused.message(), "--max_send_message_bytes")) << refused;
}

// A prefill batch of 2048 rows by reference on a server with the default
// limits (narrow rows so it is quick on the CPU; the 2048 x 64K and 8192 x
// 128K batches by CUDA IPC are the GPU's check).
TEST(Limits, DefaultServerServes2048RowsByReference) {
  TestServer t = StartServer(DefaultLimits());
  ASSERT_NE(t.client, nullptr);
  absl::StatusOr<v1::ServerInfo> info = t.client->GetServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->limits().max_rows(), 8192);
  auto session = client::RegionSession::Open(*t.client);
  ASSERT_TRUE(session.ok()) << session.status();
  const int32_t k = 16;
  const tools::PackedRows rows =
      Rows(Distribution::kIndexer, 2048, 200, LengthPattern::kRandom, 11, k);
  SegmentRows laid = LayOut(rows, RowLayout::kPitched, k);
  ASSERT_TRUE((*session)->Register("seg", laid.segment).ok());
  absl::StatusOr<client::SelectResult> result = SelectByReference(**session, laid, rows, k);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->num_rows, 2048);
  EXPECT_TRUE(tools::Verify(rows, k, {}, *result).ok());
}

}  // namespace
}  // namespace topk::server::test
