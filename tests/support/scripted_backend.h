// A backend that selects nothing: the engine's unit tests drive the real
// engine (queues, workers, coalescing, plan cache) against it and read back
// exactly what the engine asked of the backend. Its answers are synthetic
// (row r's slot j holds r * 1000 + j, r counted over the whole batch), so a
// test sees which rows of a batch each job was handed; its row statuses and
// call statuses are scripted. No selector, no gRPC: every test runs in
// milliseconds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/backends/backend.h"
#include "server/backends/plan_buckets.h"
#include "server/engine/engine.h"
#include "server/engine/select_job.h"

namespace topk::server::test {

// One job's share of a backend call, as the backend saw it.
struct ScriptedPart {
  const RowSource* source = nullptr;
  int64_t first_row = 0;
  int64_t num_rows = 0;
  int64_t element_offset = 0;
};

// One backend call.
struct ScriptedCall {
  PlanKey key;  // of the plan it ran with
  std::vector<ScriptedPart> parts;
  std::vector<int32_t> lengths;      // the batch's, row by row
  std::vector<int64_t> row_offsets;  // the batch's, in elements
  int64_t total_elements = 0;
  ScoreType dtype = ScoreType::kFloat32;
};

// What the scripted devices share with the test: every plan made and call
// run, a gate that holds calls, and the script.
class Script {
 public:
  // Row statuses the `call`-th backend call (from 0, in the order calls
  // enter) reports, by row of its batch.
  void FailRowsOfCall(size_t call, std::vector<std::pair<int64_t, RowStatus>> rows) {
    absl::MutexLock lock(&mu_);
    bad_rows_.push_back({call, std::move(rows)});
  }
  // What every Select returns from now on (OK: a synthetic answer).
  void SetCallStatus(absl::Status status) {
    absl::MutexLock lock(&mu_);
    call_status_ = std::move(status);
  }
  // What MakePlan returns for K = `k` (an error: no plan).
  void FailPlansOfK(int32_t k, absl::Status status) {
    absl::MutexLock lock(&mu_);
    plan_failures_.emplace_back(k, std::move(status));
  }
  void Close() {
    absl::MutexLock lock(&mu_);
    open_ = false;
  }
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  // Waits until `n` calls have entered a backend.
  bool WaitEntered(size_t n, absl::Duration timeout = absl::Seconds(10)) {
    absl::MutexLock lock(&mu_);
    const auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return calls_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }
  std::vector<ScriptedCall> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  std::vector<PlanKey> plans_made() const {
    absl::MutexLock lock(&mu_);
    return plans_;
  }

  absl::StatusOr<Plan> MakePlan(const ProblemShape& shape, const SelectOptions& options) {
    absl::MutexLock lock(&mu_);
    for (const auto& [k, status] : plan_failures_) {
      if (k == shape.k) return status;
    }
    Plan plan{.shape = shape, .options = options};
    plans_.push_back(KeyOf(plan));
    return plan;
  }

  absl::Status Select(const Plan& plan, const SelectRows& rows, const SelectResults& results) {
    ScriptedCall call{
        .key = KeyOf(plan), .total_elements = rows.total_elements, .dtype = rows.dtype};
    for (const RowPart& part : rows.parts) {
      call.parts.push_back({.source = part.source,
                            .first_row = part.first_row,
                            .num_rows = part.num_rows,
                            .element_offset = part.element_offset});
    }
    if (rows.lengths != nullptr) call.lengths.assign(rows.lengths, rows.lengths + rows.num_rows);
    call.row_offsets.assign(rows.row_offsets, rows.row_offsets + rows.num_rows);
    absl::MutexLock lock(&mu_);
    const size_t index = calls_.size();
    calls_.push_back(std::move(call));
    mu_.Await(absl::Condition(&open_));
    if (!call_status_.ok()) return call_status_;
    const int32_t k = plan.shape.k;
    for (int64_t r = 0; r < rows.num_rows; ++r) {
      results.row_status[r] = RowStatus::kOk;
      for (int32_t j = 0; j < k; ++j) {
        results.indices[r * k + j] = static_cast<int32_t>(r * 1000 + j);
      }
    }
    for (const auto& [call_index, bad] : bad_rows_) {
      if (call_index != index) continue;
      for (const auto& [row, status] : bad) results.row_status[row] = status;
    }
    return absl::OkStatus();
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<ScriptedCall> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<PlanKey> plans_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<size_t, std::vector<std::pair<int64_t, RowStatus>>>> bad_rows_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<int32_t, absl::Status>> plan_failures_ ABSL_GUARDED_BY(mu_);
  absl::Status call_status_ ABSL_GUARDED_BY(mu_);
  bool open_ ABSL_GUARDED_BY(mu_) = true;
};

class ScriptedDevice final : public Device {
 public:
  explicit ScriptedDevice(Script* script, int32_t ordinal = -1)
      : script_(script), ordinal_(ordinal) {}
  std::string backend_name() const override { return "scripted"; }
  DeviceDescription description() const override {
    return {.ordinal = ordinal_, .name = absl::StrCat("scripted ", ordinal_)};
  }
  absl::StatusOr<std::unique_ptr<WorkerBackend>> CreateWorker(const RequestLimits&) override {
    return std::make_unique<Worker>(script_);
  }

 private:
  class Worker final : public WorkerBackend {
   public:
    explicit Worker(Script* script) : script_(script) {}
    absl::StatusOr<Plan> MakePlan(const ProblemShape& shape,
                                  const SelectOptions& options) const override {
      return script_->MakePlan(shape, options);
    }
    absl::Status Select(const Plan& plan, const SelectRows& rows,
                        const SelectResults& results) override {
      return script_->Select(plan, rows, results);
    }

   private:
    Script* script_;
  };

  Script* script_;
  int32_t ordinal_;
};

// A job of zero-filled host rows of the given lengths; keeps what the
// engine answered.
class ScriptedJob final : public SelectJob {
 public:
  ScriptedJob(std::vector<int32_t> lengths, int32_t k, ScoreType dtype = ScoreType::kFloat32,
              int32_t pinned = -1)
      : lengths_(std::move(lengths)), bytes_(Bytes(lengths_, dtype), '\0'), source_(bytes_) {
    input_.k = k;
    input_.lengths = lengths_;
    input_.rows = &source_;
    input_.num_rows = static_cast<int64_t>(lengths_.size());
    for (int32_t length : lengths_) input_.max_length = std::max(input_.max_length, length);
    input_.dtype = dtype;
    input_.device_ordinal = pinned;
  }

  const SelectInput& input() const override { return input_; }
  SelectInput& mutable_input() { return input_; }
  bool IsCancelled() const override { return false; }
  void Complete(const absl::Status& status, const SelectOutput& output) override {
    absl::MutexLock lock(&mu_);
    ++completions_;
    status_ = status;
    indices_.assign(output.indices.begin(), output.indices.end());
    batch_requests_ = output.timings.batch_requests;
  }

  bool WaitDone(absl::Duration timeout = absl::Seconds(10)) {
    absl::MutexLock lock(&mu_);
    const auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return completions_ > 0; };
    return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  }
  absl::Status status() const {
    absl::MutexLock lock(&mu_);
    return status_;
  }
  std::vector<int32_t> indices() const {
    absl::MutexLock lock(&mu_);
    return indices_;
  }
  int32_t batch_requests() const {
    absl::MutexLock lock(&mu_);
    return batch_requests_;
  }
  int completions() const {
    absl::MutexLock lock(&mu_);
    return completions_;
  }
  const RowSource* source() const { return &source_; }

 private:
  static size_t Bytes(const std::vector<int32_t>& lengths, ScoreType dtype) {
    size_t total = 0;
    for (int32_t length : lengths) total += static_cast<size_t>(length);
    return total * static_cast<size_t>(ScoreTypeBytes(dtype));
  }

  std::vector<int32_t> lengths_;
  std::string bytes_;
  ContiguousRows source_;
  SelectInput input_;
  mutable absl::Mutex mu_;
  int completions_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> indices_ ABSL_GUARDED_BY(mu_);
  int32_t batch_requests_ ABSL_GUARDED_BY(mu_) = 0;
};

struct ScriptedEngineOptions {
  int devices = 1;
  int workers_per_device = 1;
  int queue_depth = 64;
  int64_t max_queue_delay_us = 0;
  RequestLimits limits{
      .max_k = 64, .max_rows = 64, .max_width = 4096, .max_batch_bytes = int64_t{1} << 20};
};

// An engine over `options.devices` scripted devices (ordinals 0, 1, ...),
// no device probe.
inline absl::StatusOr<std::unique_ptr<Engine>> MakeScriptedEngine(
    Script* script, const ScriptedEngineOptions& options = {}) {
  std::vector<std::unique_ptr<Device>> devices;
  for (int d = 0; d < options.devices; ++d) {
    devices.push_back(std::make_unique<ScriptedDevice>(script, d));
  }
  return Engine::Create({.queue_depth = options.queue_depth,
                         .max_queue_delay_us = options.max_queue_delay_us,
                         .limits = options.limits,
                         .device_probe_ms = 0},
                        Backends{.name = "scripted",
                                 .reason = "test",
                                 .workers_per_device = options.workers_per_device,
                                 .devices = std::move(devices)});
}

}  // namespace topk::server::test
