// The engine's device watch (EngineOptions::device_probe_ms): a device whose
// probe fails is marked unusable while nothing is asked of it, jobs go to the
// devices left, and the callback runs once, when none is left.
#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "support/fake_devices.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

using testing::Distribution;
using testing::LengthPattern;

struct Watched {
  std::unique_ptr<Engine> engine;
  std::vector<FakeDevice*> devices;
};

Watched Start(DeviceLog* log, int devices, int64_t probe_ms, std::atomic<int>* lost) {
  Watched w;
  std::vector<std::unique_ptr<Device>> owned;
  for (int d = 0; d < devices; ++d) {
    auto device = std::make_unique<FakeDevice>(d, log);
    w.devices.push_back(device.get());
    owned.push_back(std::move(device));
  }
  Backends backends{
      .name = "fake", .reason = "test", .workers_per_device = 1, .devices = std::move(owned)};
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create({.queue_depth = 8,
                      .max_queue_delay_us = 0,
                      .limits = SmallLimits(),
                      .device_probe_ms = probe_ms,
                      .on_no_usable_device = [lost] { lost->fetch_add(1); }},
                     std::move(backends));
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (engine.ok()) w.engine = *std::move(engine);
  return w;
}

// Waits up to 2 s for `done`.
template <typename Done>
bool Eventually(Done done) {
  for (int i = 0; i < 400 && !done(); ++i) absl::SleepFor(absl::Milliseconds(5));
  return done();
}

TEST(DeviceProbe, AnIdleLostDeviceTurnsUnusableAndTheLastOneCallsBack) {
  DeviceLog log;
  std::atomic<int> lost{0};
  Watched w = Start(&log, 2, 10, &lost);
  ASSERT_NE(w.engine, nullptr);
  ASSERT_TRUE(Eventually([&] { return w.devices[0]->probes() > 0 && w.devices[1]->probes() > 0; }))
      << "the watch never probed";
  w.devices[1]->SetProbe(absl::UnavailableError("an illegal memory access was encountered"));
  ASSERT_TRUE(Eventually([&] { return !w.engine->devices()[1].usable; }));
  EXPECT_TRUE(w.engine->devices()[0].usable);
  EXPECT_TRUE(w.engine->usable());
  EXPECT_EQ(lost.load(), 0);
  // Jobs go to the device left, exactly answered.
  for (int i = 0; i < 4; ++i) {
    TestJob job(Rows(Distribution::kIndexer, 2, 4096, LengthPattern::kRandom, 7 + i, 64), 64);
    w.engine->Submit(&job);
    ASSERT_TRUE(job.WaitDone());
    ASSERT_TRUE(job.status().ok()) << job.status();
    EXPECT_TRUE(job.Exact().ok()) << job.Exact();
  }
  for (const auto& call : log.calls()) EXPECT_EQ(call.device, 0);
  // An unusable device is not probed again.
  const int probes = w.devices[1]->probes();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(w.devices[1]->probes(), probes);

  w.devices[0]->SetProbe(absl::UnavailableError("MPS server is not ready"));
  ASSERT_TRUE(Eventually([&] { return lost.load() > 0; }));
  EXPECT_FALSE(w.engine->usable());
  TestJob refused(Rows(Distribution::kIndexer, 1, 4096, LengthPattern::kFull, 3, 64), 64);
  w.engine->Submit(&refused);
  ASSERT_TRUE(refused.WaitDone());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(lost.load(), 1) << "the callback runs once";
}

TEST(DeviceProbe, ZeroMeansNoWatchAndProbeDevicesIsOneStep) {
  DeviceLog log;
  std::atomic<int> lost{0};
  Watched w = Start(&log, 1, 0, &lost);
  ASSERT_NE(w.engine, nullptr);
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_EQ(w.devices[0]->probes(), 0);
  EXPECT_TRUE(w.engine->ProbeDevices());
  EXPECT_EQ(w.devices[0]->probes(), 1);
  w.devices[0]->SetProbe(absl::InternalError("context lost"));
  EXPECT_FALSE(w.engine->ProbeDevices());
  EXPECT_FALSE(w.engine->devices()[0].usable);
  EXPECT_EQ(lost.load(), 0) << "only the watch calls back";
}

TEST(DeviceProbe, NegativeIntervalIsRefused) {
  DeviceLog log;
  std::vector<std::unique_ptr<Device>> devices;
  devices.push_back(std::make_unique<FakeDevice>(0, &log));
  Backends backends{
      .name = "fake", .reason = "test", .workers_per_device = 1, .devices = std::move(devices)};
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(
      {.queue_depth = 8, .limits = SmallLimits(), .device_probe_ms = -1}, std::move(backends));
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("--device_probe_ms"), std::string::npos);
}

}  // namespace
}  // namespace topk::server::test
