// The engine over several devices, with fake ones (CPU selection
// underneath) that record which device served which request: every device
// gets its own workers; requests spread by load; requests pinned to a
// device (their regions are there) stay there; a device that turns
// unusable hands its queued requests to the others.
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "support/fake_devices.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

using testing::Distribution;
using testing::LengthPattern;

std::unique_ptr<TestJob> Job(uint64_t seed, int32_t pinned = -1) {
  return std::make_unique<TestJob>(
      Rows(Distribution::kIndexer, 1 + seed % 3, 2000, LengthPattern::kRandom, seed, 32), 32,
      /*return_values=*/false, pinned);
}

struct TwoDevices {
  DeviceLog log;
  FakeDevice* devices[2] = {nullptr, nullptr};
  std::unique_ptr<Engine> engine;

  TwoDevices(int workers, CallVerdict verdict = nullptr) {
    std::vector<std::unique_ptr<Device>> list;
    for (int32_t d = 0; d < 2; ++d) {
      auto device = std::make_unique<FakeDevice>(d, &log, verdict);
      devices[d] = device.get();
      list.push_back(std::move(device));
    }
    // Coalescing off: every request is its own call, so calls count requests.
    engine = MakeEngine(std::move(list), workers, /*max_queue_delay_us=*/0);
  }
  ~TwoDevices() {
    log.Open();
    if (engine) engine->Stop();
  }

  // Holds both devices' one worker with a request each.
  std::vector<std::unique_ptr<TestJob>> Occupy() {
    log.Close();
    std::vector<std::unique_ptr<TestJob>> blockers;
    for (int i = 0; i < 2; ++i) {
      blockers.push_back(Job(900 + i));
      engine->Submit(blockers.back().get());
      EXPECT_TRUE(log.WaitEntered(i + 1));
    }
    return blockers;
  }
};

TEST(MultiDevice, EveryDeviceGetsItsOwnWorkers) {
  TwoDevices t(/*workers=*/3);
  ASSERT_NE(t.engine, nullptr);
  const std::vector<EngineDevice> devices = t.engine->devices();
  ASSERT_EQ(devices.size(), 2u);
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(devices[d].description.ordinal, d);
    EXPECT_EQ(devices[d].workers, 3);
    EXPECT_TRUE(devices[d].usable);
    EXPECT_EQ(t.devices[d]->workers_created(), 3);
  }
}

TEST(MultiDevice, RequestsSpreadByLoad) {
  TwoDevices t(1);
  ASSERT_NE(t.engine, nullptr);
  std::vector<std::unique_ptr<TestJob>> blockers = t.Occupy();
  // The two blockers went one to each device (the second saw the first's
  // device loaded).
  EXPECT_NE(t.log.ServedBy(*blockers[0]), t.log.ServedBy(*blockers[1]));
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 8; ++i) {
    jobs.push_back(Job(10 + i));
    t.engine->Submit(jobs.back().get());
  }
  // Equal load, so the queues take turns.
  const std::vector<EngineDevice> devices = t.engine->devices();
  EXPECT_EQ(devices[0].queue_depth, 4);
  EXPECT_EQ(devices[1].queue_depth, 4);
  t.log.Open();
  int served[2] = {0, 0};
  for (auto& job : jobs) {
    ASSERT_TRUE(job->WaitDone());
    EXPECT_TRUE(job->Exact().ok()) << job->Exact();
    const int32_t device = t.log.ServedBy(*job);
    ASSERT_TRUE(device == 0 || device == 1);
    ++served[device];
  }
  EXPECT_EQ(served[0], 4);
  EXPECT_EQ(served[1], 4);
  for (auto& job : blockers) ASSERT_TRUE(job->WaitDone());
}

TEST(MultiDevice, PinnedRequestsStayOnTheirDevice) {
  TwoDevices t(1);
  ASSERT_NE(t.engine, nullptr);
  std::vector<std::unique_ptr<TestJob>> blockers = t.Occupy();
  // Six pinned to device 1 queue there however long its queue gets; the
  // unpinned ones then all go to the idler device 0.
  std::vector<std::unique_ptr<TestJob>> pinned, free;
  for (int i = 0; i < 6; ++i) {
    pinned.push_back(Job(20 + i, /*pinned=*/1));
    t.engine->Submit(pinned.back().get());
  }
  for (int i = 0; i < 6; ++i) {
    free.push_back(Job(40 + i));
    t.engine->Submit(free.back().get());
  }
  t.log.Open();
  for (auto& job : pinned) {
    ASSERT_TRUE(job->WaitDone());
    EXPECT_TRUE(job->Exact().ok()) << job->Exact();
    EXPECT_EQ(t.log.ServedBy(*job), 1);
  }
  for (auto& job : free) {
    ASSERT_TRUE(job->WaitDone());
    EXPECT_TRUE(job->Exact().ok()) << job->Exact();
    EXPECT_EQ(t.log.ServedBy(*job), 0);
  }
  for (auto& job : blockers) ASSERT_TRUE(job->WaitDone());
}

TEST(MultiDevice, UnusableDeviceHandsItsQueueToTheOther) {
  // Device 0 fails its first call with a device error (sticky).
  auto failed_once = std::make_shared<std::atomic<bool>>(false);
  TwoDevices t(1, [failed_once](int32_t device, const SelectRows&) {
    if (device == 0 && !failed_once->exchange(true)) {
      return absl::UnavailableError("injected: device 0 lost");
    }
    return absl::OkStatus();
  });
  ASSERT_NE(t.engine, nullptr);
  std::vector<std::unique_ptr<TestJob>> blockers = t.Occupy();
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 6; ++i) {
    jobs.push_back(Job(60 + i));
    t.engine->Submit(jobs.back().get());
  }
  EXPECT_EQ(t.engine->devices()[0].queue_depth, 3);
  t.log.Open();
  for (auto& job : blockers) ASSERT_TRUE(job->WaitDone());
  TestJob& on_zero = t.log.ServedBy(*blockers[0]) == 0 ? *blockers[0] : *blockers[1];
  TestJob& on_one = &on_zero == blockers[0].get() ? *blockers[1] : *blockers[0];
  EXPECT_EQ(on_zero.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(on_zero.status().message(), "injected: device 0 lost");
  EXPECT_TRUE(on_one.Exact().ok()) << on_one.Exact();
  // Every queued request, those that were on device 0 included, served by 1.
  for (auto& job : jobs) {
    ASSERT_TRUE(job->WaitDone());
    EXPECT_TRUE(job->Exact().ok()) << job->Exact();
    EXPECT_EQ(t.log.ServedBy(*job), 1);
  }
  const std::vector<EngineDevice> devices = t.engine->devices();
  EXPECT_FALSE(devices[0].usable);
  EXPECT_TRUE(devices[1].usable);
  EXPECT_TRUE(t.engine->usable());
  // New requests go to device 1; one pinned to device 0 is refused.
  auto later = Job(80);
  t.engine->Submit(later.get());
  ASSERT_TRUE(later->WaitDone());
  EXPECT_TRUE(later->Exact().ok()) << later->Exact();
  EXPECT_EQ(t.log.ServedBy(*later), 1);
  auto pinned = Job(81, /*pinned=*/0);
  t.engine->Submit(pinned.get());
  ASSERT_TRUE(pinned->WaitDone());
  EXPECT_EQ(pinned->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(pinned->status().message(), "device 0")) << pinned->status();
}

}  // namespace
}  // namespace topk::server::test
