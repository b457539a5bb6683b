// CreateBackends (server/backends/backend_factory.h), the composition root's
// choice of devices: the backend names it accepts, the CPU's defaults, an
// injected device replacing the choice, and auto/cuda without a usable GPU
// (skipped where one is usable: then they pick it).
#include "server/backends/backend_factory.h"

#include <memory>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "server/backends/cpu_backend.h"

namespace topk::server::test {
namespace {

TEST(BackendFactory, AnUnknownBackendIsRefusedNamingTheFlag) {
  const absl::Status status = CreateBackends({.backend = "gpu"}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "--backend=gpu: expected auto, cuda or cpu");
}

TEST(BackendFactory, CpuIsOneDeviceWithTheDefaultWorkers) {
  absl::StatusOr<Backends> cpu = CreateBackends({.backend = "cpu", .cpu_threads = 1});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->name, "cpu");
  EXPECT_EQ(cpu->reason, "--backend=cpu");
  EXPECT_EQ(cpu->workers_per_device, kDefaultCpuWorkers);
  ASSERT_EQ(cpu->devices.size(), 1u);
  EXPECT_EQ(cpu->devices[0]->description().ordinal, -1);
  absl::StatusOr<Backends> three = CreateBackends({.backend = "cpu", .workers = 3});
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(three->workers_per_device, 3);
}

TEST(BackendFactory, AnInjectedDeviceReplacesTheChoice) {
  int made = 0;
  absl::StatusOr<Backends> injected = CreateBackends(
      {.backend = "not even a backend", .device_factory = [&]() -> std::unique_ptr<Device> {
         ++made;
         return MakeCpuDevice(1, 1);
       }});
  ASSERT_TRUE(injected.ok()) << injected.status();
  EXPECT_EQ(made, 1);
  EXPECT_EQ(injected->name, "cpu");  // the device's own backend name
  EXPECT_EQ(injected->reason, "injected device");
  EXPECT_EQ(injected->devices.size(), 1u);
  EXPECT_EQ(injected->workers_per_device, kDefaultCpuWorkers);
}

TEST(BackendFactory, AutoWithoutAGpuServesOnTheCpuAndSaysWhy) {
  absl::StatusOr<Backends> chosen = CreateBackends({.backend = "auto", .cpu_threads = 1});
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  if (chosen->name == "cuda") GTEST_SKIP() << "a CUDA device is usable here: " << chosen->reason;
  EXPECT_EQ(chosen->name, "cpu");
  EXPECT_TRUE(absl::StartsWith(chosen->reason, "--backend=auto: no usable CUDA device ("))
      << chosen->reason;
  EXPECT_TRUE(absl::EndsWith(chosen->reason, "); serving on the CPU")) << chosen->reason;
}

TEST(BackendFactory, CudaWithoutAGpuFailsInsteadOfFallingBack) {
  absl::StatusOr<Backends> chosen = CreateBackends({.backend = "cuda"});
  if (chosen.ok()) GTEST_SKIP() << "a CUDA device is usable here: " << chosen->reason;
  EXPECT_EQ(chosen.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(chosen.status().message(), "--backend=cuda: ")) << chosen.status();
}

}  // namespace
}  // namespace topk::server::test
