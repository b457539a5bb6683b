// Engine-level test pieces (no gRPC) for suites that run the real CPU
// selector: a SelectJob over generated rows that keeps its answer; a fake
// device (CPU selection underneath) that records which device served which
// job in which call, and lets a test hold or fail its calls; and a gated CPU
// device the region suites hold a request inside while they act (unregister,
// end a session, shrink memory). The engine's unit tests use the scripted
// backend instead (scripted_backend.h), which selects nothing.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "packed_rows.h"
#include "server/backends/cpu_backend.h"
#include "server/engine/engine.h"
#include "topk/client/client.h"

namespace topk::server::test {

// How a job's rows are held: as aligned floats a host backend reads in
// place, or one byte off alignment, so that they must be copied (staged).
enum class Held { kInPlace, kStaged };

class TestJob final : public SelectJob {
 public:
  TestJob(tools::PackedRows rows, int32_t k, bool return_values = false, int32_t pinned = -1,
          Held held = Held::kInPlace)
      : rows_(std::move(rows)), misaligned_(1 + rows_.bytes(), '\0'), source_(Bytes(held)) {
    input_.k = k;
    input_.return_values = return_values;
    input_.lengths = rows_.lengths;
    input_.rows = &source_;
    input_.max_length = *std::max_element(rows_.lengths.begin(), rows_.lengths.end());
    input_.num_rows = static_cast<int64_t>(rows_.lengths.size());
    input_.device_ordinal = pinned;
    input_.dtype = rows_.dtype;
  }

  const SelectInput& input() const override { return input_; }
  bool IsCancelled() const override { return false; }
  void Complete(const absl::Status& status, const SelectOutput& output) override {
    absl::MutexLock lock(&mu_);
    EXPECT_FALSE(done_) << "completed twice";
    status_ = status;
    timings_ = output.timings;
    result_.num_rows = input_.num_rows;
    result_.k = input_.k;
    result_.indices.assign(output.indices.begin(), output.indices.end());
    // Values in the rows' type: FP32 into `values`, 16-bit patterns into `values16`.
    if (input_.dtype == ScoreType::kFloat32) {
      result_.values.resize(output.values.size() / sizeof(float));
      std::memcpy(result_.values.data(), output.values.data(), output.values.size());
    } else {
      result_.values16.resize(output.values.size() / sizeof(uint16_t));
      std::memcpy(result_.values16.data(), output.values.data(), output.values.size());
    }
    done_ = true;
  }

  bool WaitDone(absl::Duration timeout = absl::Seconds(30)) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&done_), timeout);
  }
  absl::Status status() const {
    absl::MutexLock lock(&mu_);
    return status_;
  }
  SelectTimings timings() const {
    absl::MutexLock lock(&mu_);
    return timings_;
  }
  const RowSource* source() const { return &source_; }
  bool in_place() const { return source_.InPlaceHostFloats() != nullptr; }
  const tools::PackedRows& rows() const { return rows_; }

  // The answer checked exactly: indices with the verifier, values (when
  // asked for) bit for bit against the rows.
  absl::Status Exact() const {
    absl::MutexLock lock(&mu_);
    if (!status_.ok()) return status_;
    if (absl::Status s = tools::Verify(rows_, input_.k, input_.options, result_); !s.ok()) return s;
    if (!input_.return_values) {
      return result_.values.empty() && result_.values16.empty()
                 ? absl::OkStatus()
                 : absl::InternalError("values sent though not asked for");
    }
    const int64_t k = input_.k;
    const bool wide = input_.dtype == ScoreType::kFloat32;
    const size_t count = wide ? result_.values.size() : result_.values16.size();
    if (static_cast<int64_t>(count) != input_.num_rows * k) {
      return absl::InternalError("values: wrong count");
    }
    const auto nan16 = static_cast<uint16_t>(QuietNanBits(input_.dtype));
    for (int64_t r = 0; r < input_.num_rows; ++r) {
      for (int64_t j = 0; j < k; ++j) {
        const int32_t index = result_.indices[r * k + j];
        bool ok = false;
        if (wide) {
          const float value = result_.values[r * k + j];
          ok = index < 0 ? std::isnan(value) : value == rows_.scores[rows_.offsets[r] + index];
        } else {
          const uint16_t value = result_.values16[r * k + j];
          ok = value == (index < 0 ? nan16 : rows_.scores16[rows_.offsets[r] + index]);
        }
        if (!ok) return absl::InternalError(absl::StrCat("values: row ", r, " slot ", j));
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::string_view Bytes(Held held) {
    const std::string_view wire = client::ScoreBytes(rows_.view());
    const char* bytes = wire.data();
    const size_t size = wire.size();
    if (held == Held::kInPlace) return absl::string_view(bytes, size);
    std::copy(bytes, bytes + size, misaligned_.begin() + 1);
    return absl::string_view(misaligned_.data() + 1, size);
  }

  tools::PackedRows rows_;
  std::string misaligned_;
  ContiguousRows source_;
  SelectInput input_;
  mutable absl::Mutex mu_;
  bool done_ = false;
  absl::Status status_;
  SelectTimings timings_;
  client::SelectResult result_;
};

// One backend call as a fake device saw it.
struct Call {
  int32_t device = 0;
  std::vector<const RowSource*> parts;  // the jobs it served, by source
};

// What the fake devices share with the test: the calls, in order, and a
// gate that holds every call while closed.
class DeviceLog {
 public:
  void Record(int32_t device, const SelectRows& rows) {
    Call call{.device = device};
    for (const RowPart& part : rows.parts) call.parts.push_back(part.source);
    absl::MutexLock lock(&mu_);
    calls_.push_back(std::move(call));
    ++entered_;
  }
  std::vector<Call> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  // The device that served `job` successfully, as last recorded (-1: none).
  int32_t ServedBy(const TestJob& job) const {
    absl::MutexLock lock(&mu_);
    int32_t device = -1;
    for (const Call& call : calls_) {
      if (std::find(call.parts.begin(), call.parts.end(), job.source()) != call.parts.end()) {
        device = call.device;
      }
    }
    return device;
  }
  // Waits until `n` calls have entered a device.
  bool WaitEntered(int n, absl::Duration timeout = absl::Seconds(30)) {
    absl::MutexLock lock(&mu_);
    const auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return entered_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }
  void Close() {
    absl::MutexLock lock(&mu_);
    open_ = false;
  }
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  void WaitOpen() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&open_));
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<Call> calls_;
  int entered_ = 0;
  bool open_ = true;
};

// Decides a call's fate after it was recorded and the gate let it through:
// OK runs the CPU selection, anything else is returned instead.
using CallVerdict = std::function<absl::Status(int32_t device, const SelectRows& rows)>;

class FakeDevice final : public Device {
 public:
  FakeDevice(int32_t ordinal, DeviceLog* log, CallVerdict verdict = nullptr)
      : ordinal_(ordinal), log_(log), verdict_(std::move(verdict)) {}
  std::string backend_name() const override { return "fake"; }
  DeviceDescription description() const override {
    return {.ordinal = ordinal_, .name = absl::StrCat("fake ", ordinal_)};
  }
  absl::StatusOr<std::unique_ptr<WorkerBackend>> CreateWorker(
      const RequestLimits& limits) override {
    absl::StatusOr<std::unique_ptr<WorkerBackend>> inner =
        MakeCpuDevice(1, 1)->CreateWorker(limits);
    if (!inner.ok()) return inner.status();
    ++workers_created_;
    return std::make_unique<Worker>(ordinal_, log_, verdict_, *std::move(inner));
  }
  int workers_created() const { return workers_created_; }
  // What Probe() answers (OK until set): the device watch's view of the
  // context.
  void SetProbe(absl::Status status) {
    absl::MutexLock lock(&probe_mu_);
    probe_ = std::move(status);
  }
  absl::Status Probe() override {
    absl::MutexLock lock(&probe_mu_);
    ++probes_;
    return probe_;
  }
  int probes() const {
    absl::MutexLock lock(&probe_mu_);
    return probes_;
  }

 private:
  class Worker final : public WorkerBackend {
   public:
    Worker(int32_t ordinal, DeviceLog* log, CallVerdict verdict,
           std::unique_ptr<WorkerBackend> inner)
        : ordinal_(ordinal), log_(log), verdict_(std::move(verdict)), inner_(std::move(inner)) {}
    absl::StatusOr<Plan> MakePlan(const ProblemShape& shape,
                                  const SelectOptions& options) const override {
      return inner_->MakePlan(shape, options);
    }
    absl::Status Select(const Plan& plan, const SelectRows& rows,
                        const SelectResults& results) override {
      log_->Record(ordinal_, rows);
      log_->WaitOpen();
      if (verdict_) {
        if (absl::Status s = verdict_(ordinal_, rows); !s.ok()) return s;
      }
      return inner_->Select(plan, rows, results);
    }

   private:
    int32_t ordinal_;
    DeviceLog* log_;
    CallVerdict verdict_;
    std::unique_ptr<WorkerBackend> inner_;
  };

  int32_t ordinal_;
  DeviceLog* log_;
  CallVerdict verdict_;
  int workers_created_ = 0;
  mutable absl::Mutex probe_mu_;
  absl::Status probe_;
  int probes_ = 0;
};

inline RequestLimits SmallLimits() {
  return {.max_k = 512,
          .max_rows = 64,
          .max_width = int64_t{1} << 16,
          .max_batch_bytes = int64_t{16} << 20};
}

inline std::unique_ptr<Engine> MakeEngine(std::vector<std::unique_ptr<Device>> devices,
                                          int workers_per_device, int64_t max_queue_delay_us) {
  Backends backends{.name = "fake",
                    .reason = "test",
                    .workers_per_device = workers_per_device,
                    .devices = std::move(devices)};
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(
      {.queue_depth = 64, .max_queue_delay_us = max_queue_delay_us, .limits = SmallLimits()},
      std::move(backends));
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? *std::move(engine) : nullptr;
}

// Rows with a NaN in row `bad_row`'s valid prefix (full-length rows).
inline tools::PackedRows WithNan(tools::PackedRows rows, int64_t bad_row) {
  rows.scores[rows.offsets[bad_row] + rows.lengths[bad_row] / 2] = std::nanf("");
  return rows;
}

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
