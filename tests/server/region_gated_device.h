// A CPU device whose selections wait for a notification: the region suites
// use it to act (unregister, end a session, shrink memory) while a request
// is known to be inside the device.
#pragma once

#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "server/backends/cpu_backend.h"

namespace topk::server::test {

// A CPU device whose selections wait for `release` after announcing
// themselves on `entered`.
class GatedDevice final : public Device {
 public:
  GatedDevice(absl::Notification* entered, absl::Notification* release)
      : entered_(entered), release_(release) {}
  std::string backend_name() const override { return "cpu"; }
  DeviceDescription description() const override { return {.name = "gated cpu"}; }
  absl::StatusOr<std::unique_ptr<WorkerBackend>> CreateWorker(
      const RequestLimits& limits) override {
    class Worker final : public WorkerBackend {
     public:
      // The engine keeps workers, not devices: copy what the worker needs.
      Worker(std::unique_ptr<WorkerBackend> inner, absl::Notification* entered,
             absl::Notification* release)
          : inner_(std::move(inner)), entered_(entered), release_(release) {}
      absl::StatusOr<Plan> MakePlan(const ProblemShape& shape,
                                    const SelectOptions& options) const override {
        return inner_->MakePlan(shape, options);
      }
      absl::Status Select(const Plan& plan, const SelectRows& rows,
                          const SelectResults& results) override {
        if (!entered_->HasBeenNotified()) entered_->Notify();
        release_->WaitForNotification();
        return inner_->Select(plan, rows, results);
      }

     private:
      std::unique_ptr<WorkerBackend> inner_;
      absl::Notification* entered_;
      absl::Notification* release_;
    };
    absl::StatusOr<std::unique_ptr<WorkerBackend>> inner =
        MakeCpuDevice(1, 1)->CreateWorker(limits);
    if (!inner.ok()) return inner.status();
    return std::make_unique<Worker>(*std::move(inner), entered_, release_);
  }

 private:
  absl::Notification* entered_;
  absl::Notification* release_;
};

}  // namespace topk::server::test
