// How busy a device's workers have been lately: the signal an autoscaler
// scales on (topk_device_saturation). Each worker reports the batches it
// served (start and end, on SteadyNowUs); the window is exponentially
// weighted with a 10 s time constant, as a load average is, so it needs no
// sampling thread and no per-scrape state: a worker busy all the time reads
// 1, an idle one decays to 0 (1/e of the past after 10 s), and a device
// reads the mean over its workers. Also the plain total of busy time
// (topk_device_busy_seconds_total), for a window of one's own in PromQL.
// A batch counts when it ends, so one that runs longer than the window
// shows at its end. Thread-safe.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace topk::server {

class BusyWindow {
 public:
  static constexpr double kTimeConstantUs = 10e6;

  // A worker served a batch from start_us to end_us.
  void AddBusy(int64_t start_us, int64_t end_us) {
    const int64_t busy_us = std::max<int64_t>(0, end_us - start_us);
    absl::MutexLock lock(&mu_);
    total_busy_us_ += busy_us;
    DecayTo(end_us);
    // The busy interval [end - d, end] weighted by exp(-(end - s) / tau)
    // over tau: 1 - exp(-d / tau); a worker busy without a pause sums to 1.
    weighted_ += -std::expm1(-static_cast<double>(busy_us) / kTimeConstantUs);
  }

  // The workers' mean busy fraction in [0, 1] as of now_us.
  double Fraction(int64_t now_us, int workers) const {
    if (workers <= 0) return 0;
    absl::MutexLock lock(&mu_);
    const double decay =
        std::exp(-static_cast<double>(std::max<int64_t>(0, now_us - as_of_us_)) / kTimeConstantUs);
    return std::clamp(weighted_ * decay / workers, 0.0, 1.0);
  }

  int64_t total_busy_us() const {
    absl::MutexLock lock(&mu_);
    return total_busy_us_;
  }

 private:
  void DecayTo(int64_t now_us) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // Batches end out of order across workers: never decay backwards.
    if (now_us <= as_of_us_) return;
    weighted_ *= std::exp(-static_cast<double>(now_us - as_of_us_) / kTimeConstantUs);
    as_of_us_ = now_us;
  }

  mutable absl::Mutex mu_;
  double weighted_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t as_of_us_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t total_busy_us_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace topk::server
